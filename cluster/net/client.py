"""A small asyncio Kafka-protocol client for node-to-node requests.

Nodes talk to each other with ordinary Kafka requests (BrokerRegistration,
Metadata, AllocateProducerIds, later WriteTxnMarkers) over plain TCP, so the
harness can put its fault proxy on every link. Requests are pipelined on one
connection and matched to responses by correlation id.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from ..protocol.codec import decode_response, encode_request

_SIZE = struct.Struct(">i")


class PeerUnavailable(ConnectionError):
    """The peer could not be reached or the connection broke mid-request."""


class PeerConnection:
    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout: float = 5.0):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)
        self._reader_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout
            )
        except (OSError, TimeoutError) as exc:
            raise PeerUnavailable(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._reader_task = asyncio.create_task(self._read_loop(self._reader))

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                (correlation_id,) = struct.unpack_from(">i", frame, 0)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    continue
                api_key, api_version, fut = entry
                if not fut.done():
                    try:
                        _, response = decode_response(api_key, api_version, frame)
                        fut.set_result(response)
                    except Exception as exc:  # surfaced to the caller
                        fut.set_exception(exc)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self._fail_pending(PeerUnavailable(f"connection to {self.host}:{self.port} closed"))
            if self._writer is not None:
                self._writer.close()
            self._writer = None

    def _fail_pending(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    async def request(self, request: Any, timeout: float = 10.0) -> Any:
        """Send one request entity and await its response entity."""
        async with self._lock:
            if not self.connected:
                await self._connect()
            correlation_id = next(self._ids) & 0x7FFFFFFF
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            cls = type(request)
            self._pending[correlation_id] = (cls.__api_key__, cls.__version__, fut)
            assert self._writer is not None
            self._writer.write(encode_request(correlation_id, request, self.client_id))
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError as exc:
            self._pending.pop(correlation_id, None)
            await self.close()
            raise PeerUnavailable(
                f"{cls.__name__} to {self.host}:{self.port} timed out after {timeout}s"
            ) from exc

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
        self._fail_pending(PeerUnavailable("connection closed"))
        self._writer = None
