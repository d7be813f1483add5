"""Plugging access control into a node at one point: the SASL APIs, the ACL APIs,
and a wrapper in front of every other handler that closes unauthenticated
connections and applies the API's authorization rule. Nothing is installed when
the settings leave security off, so a plain cluster pays nothing for it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..server.cluster_action import NODE_ONLY_APIS, refuse_cluster_action
from ..server.dispatch import ApiRegistry, Handler, RequestContext
from ..server.server import CloseConnection, KafkaServer
from .acl_apis import AclApis, AclStore, AclSync, SecurityDisabledAclApis
from .authentication import PRE_AUTHENTICATION_APIS, Authenticator
from .authorizer import Authorizer
from .config import SecurityConfig
from .rules import RULES, Access, Rule
from .sasl import ServerMechanisms

log = logging.getLogger(__name__)


class AccessControl:
    """A node's authentication and (optional) authorization."""

    def __init__(
        self,
        config: SecurityConfig,
        topic_name: Callable[[uuid.UUID], str | None],
        failed_authentication_delay_ms: int = 100,
    ) -> None:
        self.config = config
        self.topic_name = topic_name
        self.authenticator = Authenticator(
            ServerMechanisms(config.mechanisms, config.users),
            failure_delay_s=failed_authentication_delay_ms / 1000,
        )
        self.authorizer: Authorizer | None = (
            Authorizer(config.super_users, config.allow_if_no_acl) if config.authorizer else None
        )
        self.sync: AclSync | None = None

    def install(
        self,
        registry: ApiRegistry,
        server: KafkaServer,
        *,
        controller_dir: Path | None,
        controller: tuple[str, int] | None,
        client_id: str,
        refresh_interval_s: float,
    ) -> None:
        """Register the SASL and ACL APIs and guard every other API served (call after
        every component registered its APIs). ``controller_dir``: this node hosts the
        controller (the ACLs are stored there); else ``controller`` is its address."""
        self.authenticator.divert = server.divert_frames
        self.authenticator.register(registry)
        if self.authorizer is not None:
            if controller_dir is not None:
                apis = AclApis(self.authorizer, AclStore(controller_dir / "acls.json"))
            else:
                assert controller is not None
                self.sync = AclSync(self.authorizer, controller, client_id, refresh_interval_s)
                apis = AclApis(self.authorizer, None, self.sync.forward)
            apis.register(registry)
        else:
            SecurityDisabledAclApis().register(registry)
        for spec in registry.specs():
            if spec.api_key not in PRE_AUTHENTICATION_APIS:
                registry.wrap(spec.api_key, self._guard(RULES.get(spec.api_key)))
        server.on_connection_closed = self.authenticator.forget

    async def start(self) -> None:
        if self.sync is not None:
            await self.sync.start()

    async def stop(self) -> None:
        if self.sync is not None:
            await self.sync.stop()

    def _guard(self, rule: Rule | None) -> Callable[[Handler], Handler]:
        principal_of = self.authenticator.principal
        authorizer = self.authorizer
        topic_name = self.topic_name
        inter_node = self.config.inter_node
        nodes = None if inter_node is None else f"User:{inter_node.username}"

        def wrap(handler: Handler) -> Handler:
            async def guarded(ctx: RequestContext, request: Any) -> Any:
                principal = principal_of(ctx.connection_id)
                if principal is None:
                    log.info("closing %s: api %d before authentication", ctx.peer, ctx.api_key)
                    raise CloseConnection
                if authorizer is None:
                    # No ACLs: every logged-in user may do everything, except what only
                    # the nodes do (Kafka's controller listener): their own principal.
                    if ctx.api_key in NODE_ONLY_APIS and principal != nodes:
                        return refuse_cluster_action(ctx, request)
                    return await handler(ctx, request)
                if authorizer.is_super(principal):
                    return await handler(ctx, request)
                if rule is None:
                    log.info("closing %s: api %d is for super users", ctx.peer, ctx.api_key)
                    raise CloseConnection
                access = Access(authorizer, principal, ctx.peer.rpartition(":")[0], topic_name)
                return await rule(access, ctx, request, handler)

            return guarded

        return wrap
