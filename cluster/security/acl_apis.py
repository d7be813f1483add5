"""CreateAcls / DescribeAcls / DeleteAcls, with the ACLs kept by the controller so
that every node agrees: the controller's node stores them (one JSON file, written
before a change is acknowledged); the other nodes forward changes to it and pull
its ACL set (DescribeAcls, everything) every metadata refresh interval."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..net.client import PeerConnection, PeerUnavailable
from ..protocol.build import make
from ..protocol.codec import request_class
from ..storage.checkpoint import write_atomic
from .acl import AclBinding, AclFilter, InvalidAcl
from .authorizer import Authorizer

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
INVALID_REQUEST = 42
UNKNOWN_SERVER_ERROR = -1
SECURITY_DISABLED = 54


class AclStore:
    """The controller's durable ACL set."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> set[AclBinding]:
        if not self.path.exists():
            return set()
        try:
            return {AclBinding.from_json(row) for row in json.loads(self.path.read_text())}
        except (ValueError, InvalidAcl) as exc:
            raise RuntimeError(f"ACL file {self.path} is unreadable: {exc}") from exc

    def save(self, acls: set[AclBinding]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(sorted(b.to_json() for b in acls)).encode()
        write_atomic(self.path, data)


def filter_of(f: Any) -> AclFilter:
    return AclFilter(
        resource_type=int(f.resource_type_filter),
        resource_name=f.resource_name_filter,
        pattern_type=int(getattr(f, "pattern_type_filter", 1)),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=int(f.operation),
        permission=int(f.permission_type),
    )


def _described(acls: list[AclBinding]) -> list[dict[str, Any]]:
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = defaultdict(list)
    for b in acls:
        by_resource[(b.resource_type, b.resource_name, b.pattern_type)].append(b)
    return [
        {
            "resource_type": rt,
            "resource_name": name,
            "pattern_type": pt,
            "acls": [
                {
                    "principal": b.principal,
                    "host": b.host,
                    "operation": int(b.operation),
                    "permission_type": int(b.permission),
                }
                for b in bindings
            ],
        }
        for (rt, name, pt), bindings in sorted(by_resource.items())
    ]


Forward = Callable[[Any], Awaitable[Any]]


class SecurityDisabledAclApis:
    """The ACL APIs of a node without an authorizer, as Kafka's AclApis answers them:
    served (ApiVersions lists them) and refused with SECURITY_DISABLED, so a tool learns
    why (``txnchaos acls``, Kafka's kafka-acls.sh)."""

    def register(self, registry: Any) -> None:
        registry.register(DESCRIBE_ACLS, 1, 3, self.describe, owner="security")
        registry.register(CREATE_ACLS, 1, 3, self.create, owner="security")
        registry.register(DELETE_ACLS, 1, 3, self.delete, owner="security")

    async def describe(self, ctx: Any, request: Any) -> Any:
        return ctx.respond(
            throttle_time=0,
            error_code=SECURITY_DISABLED,
            error_message="No Authorizer is configured on the broker",
            resources=[],
        )

    async def create(self, ctx: Any, request: Any) -> Any:
        refused = {"error_code": SECURITY_DISABLED, "error_message": "No Authorizer is configured."}
        return ctx.respond(throttle_time=0, results=[refused for _ in request.creations])

    async def delete(self, ctx: Any, request: Any) -> Any:
        refused = {
            "error_code": SECURITY_DISABLED,
            "error_message": "No Authorizer is configured.",
            "matching_acls": [],
        }
        return ctx.respond(throttle_time=0, filter_results=[refused for _ in request.filters])


class AclApis:
    """The three ACL APIs on one node. ``store``: this node hosts the controller;
    else ``forward`` sends a change to the controller and returns its answer."""

    def __init__(
        self, authorizer: Authorizer, store: AclStore | None, forward: Forward | None = None
    ) -> None:
        self.authorizer = authorizer
        self.store = store
        self.forward = forward
        if store is not None:
            authorizer.replace(store.load())

    def register(self, registry: Any) -> None:
        registry.register(DESCRIBE_ACLS, 1, 3, self.describe, owner="security")
        registry.register(CREATE_ACLS, 1, 3, self.create, owner="security")
        registry.register(DELETE_ACLS, 1, 3, self.delete, owner="security")

    async def describe(self, ctx: Any, request: Any) -> Any:
        acls = self.authorizer.matching(filter_of(request))
        return ctx.respond(
            throttle_time=0, error_code=0, error_message=None, resources=_described(acls)
        )

    async def create(self, ctx: Any, request: Any) -> Any:
        if self.store is None:
            return await self._forwarded(ctx, request)
        acls = set(self.authorizer.acls())
        results = []
        for c in request.creations:
            try:
                acls.add(
                    AclBinding.of(
                        c.resource_type,
                        c.resource_name,
                        getattr(c, "resource_pattern_type", 3),
                        c.principal,
                        c.host,
                        c.operation,
                        c.permission_type,
                    )
                )
            except InvalidAcl as exc:
                results.append({"error_code": INVALID_REQUEST, "error_message": str(exc)})
            else:
                results.append({"error_code": 0, "error_message": None})
        self._install(acls)
        return ctx.respond(throttle_time=0, results=results)

    async def delete(self, ctx: Any, request: Any) -> Any:
        if self.store is None:
            return await self._forwarded(ctx, request)
        acls = set(self.authorizer.acls())
        results = []
        for f in request.filters:
            matched = [b for b in sorted(acls, key=AclBinding.to_json) if filter_of(f).matches(b)]
            acls.difference_update(matched)
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": int(b.resource_type),
                            "resource_name": b.resource_name,
                            "pattern_type": int(b.pattern_type),
                            "principal": b.principal,
                            "host": b.host,
                            "operation": int(b.operation),
                            "permission_type": int(b.permission),
                        }
                        for b in matched
                    ],
                }
            )
        self._install(acls)
        return ctx.respond(throttle_time=0, filter_results=results)

    def _install(self, acls: set[AclBinding]) -> None:
        assert self.store is not None
        if acls != self.authorizer.acls():
            self.store.save(acls)  # durable before acknowledged
            self.authorizer.replace(acls)

    async def _forwarded(self, ctx: Any, request: Any) -> Any:
        assert self.forward is not None
        try:
            return await self.forward(request)
        except (PeerUnavailable, OSError) as exc:
            entry = {"error_code": UNKNOWN_SERVER_ERROR, "error_message": str(exc)}
            if ctx.api_key == CREATE_ACLS:
                return ctx.respond(throttle_time=0, results=[entry for _ in request.creations])
            return ctx.respond(
                throttle_time=0,
                filter_results=[dict(entry, matching_acls=[]) for _ in request.filters],
            )


class AclSync:
    """A node without the controller: its copy of the controller's ACLs."""

    def __init__(
        self,
        authorizer: Authorizer,
        controller: tuple[str, int],
        client_id: str,
        interval_s: float,
    ) -> None:
        self.authorizer = authorizer
        self.conn = PeerConnection(*controller, client_id=client_id)
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def forward(self, request: Any) -> Any:
        """A change for the controller; the node's copy is pulled before answering."""
        response = await self.conn.request(request, timeout=30.0)
        await self.pull()
        return response

    async def pull(self) -> None:
        response = await self.conn.request(
            make(
                request_class(DESCRIBE_ACLS, 3),
                resource_type_filter=1,
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            )
        )
        if response.error_code != 0:
            raise PeerUnavailable(f"DescribeAcls failed: {response.error_code.name}")
        self.authorizer.replace(
            AclBinding.of(
                r.resource_type,
                r.resource_name,
                r.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for r in response.resources
            for a in r.acls
        )

    async def start(self) -> None:
        """The first pull (retried until the controller answers), then one per interval."""
        delay = 0.05
        while True:
            try:
                await self.pull()
                break
            except (PeerUnavailable, OSError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.pull()
            except (PeerUnavailable, OSError) as exc:
                logging.getLogger(__name__).info("ACL pull failed: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.conn.close()
