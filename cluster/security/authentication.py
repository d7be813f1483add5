"""Per-connection SASL state and the SaslHandshake (v0-v1) / SaslAuthenticate (v0-v2)
APIs. Until a connection has authenticated, only ApiVersions and these two are
served; any other request closes it, as Kafka does. After a v0 handshake the
tokens come as bare size-prefixed frames (no request header), and a refused one
closes the connection (there is no response to carry the error)."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..server.server import CloseConnection
from .sasl import AuthenticationFailed, ServerExchange, ServerMechanisms

Divert = Callable[[int, Callable[[bytes], bytes] | None], None]
"""(connection id, reader or None): ``KafkaServer.divert_frames``."""
_SIZE = struct.Struct(">i")

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
PRE_AUTHENTICATION_APIS = frozenset((SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS))
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58


@dataclass(slots=True)
class Session:
    """A connection's authentication: the exchange under way, then the principal."""

    exchange: ServerExchange | None = None
    principal: str | None = None
    failed: bool = False


class Authenticator:
    def __init__(
        self,
        mechanisms: ServerMechanisms,
        divert: Divert | None = None,
        failure_delay_s: float = 0.1,
    ) -> None:
        self.mechanisms = mechanisms
        self.divert = divert
        # connection.failed.authentication.delay.ms: a failed login is answered this much
        # later (Kafka's delay; 27,597 bad logins were answered in 30 s without it).
        self.failure_delay_s = failure_delay_s
        self._sessions: dict[int, Session] = {}
        self.successes = 0
        self.failures = 0

    def principal(self, connection_id: int) -> str | None:
        session = self._sessions.get(connection_id)
        return None if session is None else session.principal

    def forget(self, connection_id: int) -> None:
        self._sessions.pop(connection_id, None)

    def register(self, registry: Any) -> None:
        low = 0 if self.divert is not None else 1
        registry.register(SASL_HANDSHAKE, low, 1, self.handshake, owner="security")
        registry.register(SASL_AUTHENTICATE, 0, 2, self.authenticate, owner="security")

    async def handshake(self, ctx: Any, request: Any) -> Any:
        enabled = list(self.mechanisms.enabled)
        session = self._sessions.get(ctx.connection_id)
        if session is not None:
            session.failed = True
            return ctx.respond(error_code=ILLEGAL_SASL_STATE, mechanisms=enabled)
        session = self._sessions[ctx.connection_id] = Session()
        if request.mechanism not in self.mechanisms.enabled:
            session.failed = True
            self.failures += 1
            return ctx.respond(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
        session.exchange = self.mechanisms.start(request.mechanism)
        if ctx.api_version == 0 and self.divert is not None:
            self.divert(ctx.connection_id, self._raw_tokens(ctx.connection_id, ctx.peer, session))
        return ctx.respond(error_code=0, mechanisms=enabled)

    def _raw_tokens(
        self, connection_id: int, peer: str, session: Session
    ) -> Callable[[bytes], bytes]:
        def read(token: bytes) -> bytes:
            assert session.exchange is not None and self.divert is not None
            try:
                answer = session.exchange.step(bytes(token))
            except AuthenticationFailed as exc:
                self.failures += 1
                log.info("authentication of %s failed: %s", peer, exc)
                raise CloseConnection from exc
            if session.exchange.principal is not None:
                session.principal = session.exchange.principal
                session.exchange = None
                self.successes += 1
                self.divert(connection_id, None)
            return _SIZE.pack(len(answer)) + answer

        return read

    async def authenticate(self, ctx: Any, request: Any) -> Any:
        session = self._sessions.get(ctx.connection_id)
        if session is None or session.exchange is None or session.failed or session.principal:
            return self._refuse(ctx, ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
        try:
            answer = session.exchange.step(bytes(request.auth_bytes))
        except AuthenticationFailed as exc:
            session.failed = True
            self.failures += 1
            log.info("authentication of %s failed: %s", ctx.peer, exc)
            if self.failure_delay_s > 0:
                await asyncio.sleep(self.failure_delay_s)
            return self._refuse(ctx, SASL_AUTHENTICATION_FAILED, str(exc))
        session.principal = session.exchange.principal
        if session.principal is not None:
            session.exchange = None
            self.successes += 1
        return ctx.respond(error_code=0, error_message=None, auth_bytes=answer, session_lifetime=0)

    @staticmethod
    def _refuse(ctx: Any, code: int, message: str) -> Any:
        return ctx.respond(
            error_code=code, error_message=message, auth_bytes=b"", session_lifetime=0
        )
