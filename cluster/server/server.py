"""The node's Kafka-protocol TCP server.

One task per connection reads size-prefixed frames and answers them strictly in
order, one at a time, as Kafka does (it mutes a connection while a request is in
flight). Connections are independent, so a long-polling Fetch or JoinGroup on one
connection never holds up another.

Bad input follows Kafka: a frame larger than ``max_frame_bytes``, an unknown API
key or version, or a body that does not decode closes that connection (nothing
else is affected); ApiVersions with an unsupported version is answered with a v0
response carrying UNSUPPORTED_VERSION and the supported ranges, so the client can
downgrade.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.build import make
from ..protocol.codec import (
    ProtocolError,
    UnsupportedApi,
    decode_request,
    encode_response,
    read_prefix,
    response_class,
)
from .dispatch import ApiRegistry, RequestContext

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")


class CloseConnection(Exception):
    """Raised by a handler to close the client's connection without a response
    (Kafka does this e.g. for a failed acks=0 produce)."""


RequestObserver = Callable[[int, int, Any, float, int, int], None]
"""(api_key, api_version, response_or_None, seconds, bytes_in, bytes_out)."""


class KafkaServer:
    def __init__(
        self,
        registry: ApiRegistry,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = 100 * 1024 * 1024,
        observer: RequestObserver | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.observer = observer
        self._server: asyncio.Server | None = None
        self._connections: dict[int, asyncio.StreamWriter] = {}
        self._ids = itertools.count(1)
        self.protocol_errors = 0

    async def bind(self) -> int:
        """Bind the listening socket (so the port is known) without accepting yet."""
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            reuse_address=True,
            limit=1 << 20,
            start_serving=False,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def serve(self) -> None:
        """Start accepting connections (every handler is registered by now)."""
        assert self._server is not None, "bind() first"
        await self._server.start_serving()

    async def start(self) -> int:
        port = await self.bind()
        await self.serve()
        return port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections.values()):
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn_id = next(self._ids)
        self._connections[conn_id] = writer
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        try:
            while True:
                try:
                    size_bytes = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = _SIZE.unpack(size_bytes)
                if size < 0 or size > self.max_frame_bytes:
                    self.protocol_errors += 1
                    log.warning(
                        "closing %s: frame of %d bytes exceeds the limit of %d",
                        peer,
                        size,
                        self.max_frame_bytes,
                    )
                    return
                try:
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                response_bytes = await self._handle_frame(frame, peer, conn_id)
                if response_bytes is None:
                    continue
                writer.write(response_bytes)
                await writer.drain()
        except CloseConnection:
            return
        except ProtocolError as exc:
            self.protocol_errors += 1
            log.info("closing %s: %s", peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._connections.pop(conn_id, None)
            writer.close()

    async def _handle_frame(self, frame: bytes, peer: str, conn_id: int) -> bytes | None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        prefix = read_prefix(frame)
        if prefix.api_key == API_VERSIONS_KEY and not self.registry.supports(
            API_VERSIONS_KEY, prefix.api_version
        ):
            # KIP-511: answer with v0 and the supported ranges so the client downgrades.
            response = make(
                response_class(API_VERSIONS_KEY, 0),
                error_code=ErrorCode.unsupported_version,
                api_keys=self.api_version_ranges(),
            )
            return encode_response(prefix.correlation_id, response)
        spec = self.registry.get(prefix.api_key)
        if spec is None or not (spec.min_version <= prefix.api_version <= spec.max_version):
            raise ProtocolError(
                f"unsupported api key {prefix.api_key} version {prefix.api_version}"
            )
        try:
            header, request = decode_request(frame)
        except UnsupportedApi as exc:
            raise ProtocolError(str(exc)) from exc
        ctx = RequestContext(
            api_key=prefix.api_key,
            api_version=prefix.api_version,
            correlation_id=prefix.correlation_id,
            client_id=getattr(header, "client_id", None),
            peer=peer,
            connection_id=conn_id,
        )
        try:
            response = await spec.handler(ctx, request)
        except CloseConnection:
            self._observe(prefix.api_key, prefix.api_version, None, started, len(frame), 0)
            raise
        except Exception as exc:
            # A bug in a handler: Kafka would answer UNKNOWN_SERVER_ERROR; we close the
            # connection (the client retries) and keep serving everyone else.
            log.exception("handler for api %d v%d failed", prefix.api_key, prefix.api_version)
            raise CloseConnection from exc
        if response is None:
            self._observe(prefix.api_key, prefix.api_version, None, started, len(frame), 0)
            return None
        data = encode_response(prefix.correlation_id, response)
        self._observe(prefix.api_key, prefix.api_version, response, started, len(frame), len(data))
        return data

    def _observe(
        self,
        api_key: int,
        api_version: int,
        response: Any,
        started: float,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        if self.observer is not None:
            elapsed = asyncio.get_running_loop().time() - started
            self.observer(api_key, api_version, response, elapsed, bytes_in + 4, bytes_out)

    def api_version_ranges(self) -> list[dict[str, int]]:
        return [
            {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
            for s in self.registry.specs()
        ]


def register_api_versions(registry: ApiRegistry, server: KafkaServer) -> None:
    """ApiVersions v0-v3, answered from the registry (so it lists exactly what is served)."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        return ctx.respond(
            error_code=0,
            api_keys=server.api_version_ranges(),
            throttle_time=0,
            supported_features=(),
            finalized_features_epoch=-1,
            finalized_features=(),
            zk_migration_ready=False,
        )

    registry.register(API_VERSIONS_KEY, 0, 3, handle, owner="node")
