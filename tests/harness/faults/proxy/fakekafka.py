"""A tiny in-test Kafka server and raw client built from the project's kio codec.

The server answers requests one at a time per connection, in order, like Kafka, and
records every request it received (with its connection), so tests can check exactly
what reached the upstream. Responses are Kafka defaults built with ``make`` plus the
broker addresses for Metadata / FindCoordinator / DescribeCluster.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import struct
import types
import typing
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from txnchaos.cluster.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_class,
    response_class,
)

T = TypeVar("T")
_SIZE = struct.Struct(">i")


def make(cls: type[T], data: dict[str, Any] | None = None) -> T:
    """Build a kio entity (any version) from a nested dict; missing fields get zeros.

    (A small test-side builder: it needs nothing but the dataclass fields and their
    ``kafka_type`` metadata.)
    """
    data = data or {}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = hints[f.name]
        ktype = f.metadata.get("kafka_type")
        if f.name in data:
            kwargs[f.name] = _convert(hint, ktype, data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _zero(hint, ktype)
    return cls(**kwargs)


def _inner(hint: Any) -> tuple[Any, bool]:
    """(element type, is_tuple) with Optional stripped."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def _convert(hint: Any, ktype: str | None, value: Any) -> Any:
    if value is None:
        return None
    inner, is_tuple = _inner(hint)
    if is_tuple:
        return tuple(_convert(inner, ktype, v) for v in value)
    if dataclasses.is_dataclass(inner) and isinstance(value, dict):
        return make(inner, value)
    if ktype in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if ktype == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    return value


def _zero(hint: Any, ktype: str | None) -> Any:
    inner, is_tuple = _inner(hint)
    if is_tuple:
        return ()
    if type(None) in typing.get_args(hint):
        return None
    if dataclasses.is_dataclass(inner):
        return make(inner, {})
    return {
        "error_code": ErrorCode.none,
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
        "string": "",
        "bool": False,
        "bytes": b"",
        "records": b"",
        "uuid": uuid.UUID(int=0),
    }.get(ktype or "", 0)


def run(coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run one async test body with a generous overall bound."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def record_batch(producer_id: int, epoch: int = 0, sequence: int = 0) -> bytes:
    """A v2 record batch header with no records (enough for the proxy's matching)."""
    header = struct.pack(
        ">qiibIhiqqqhii", 0, 49, 0, 2, 0, 0, 0, 0, 0, producer_id, epoch, sequence, 0
    )
    return header


def produce_body(txn: str | None, producer_id: int, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": txn,
        "acks": acks,
        "timeout": 30000,
        "topic_data": [
            {
                "name": "t",
                "topic_id": None,
                "partition_data": [{"index": 0, "records": record_batch(producer_id)}],
            }
        ],
    }


def big_produce(size: int, producer_id: int = 1) -> dict[str, Any]:
    """A Produce body of about ``size`` bytes (one batch header plus padding)."""
    body = produce_body(None, producer_id)
    body["topic_data"][0]["partition_data"][0]["records"] = record_batch(producer_id) + bytes(size)
    return body


@dataclass
class Received:
    conn: int
    api_key: int
    api_version: int
    correlation_id: int
    body: Any
    frame: bytes


@dataclass
class FakeKafka:
    node_id: int = 1
    brokers: list[tuple[int, str, int]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    respond: bool = True
    gate: asyncio.Event | None = None  # when set (cleared), requests wait before processing
    connections: int = 0
    _server: asyncio.Server | None = None
    _cond: asyncio.Condition | None = None
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> FakeKafka:
        self._cond = asyncio.Condition()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        if not self.brokers:
            self.brokers = [(self.node_id, *self.address)]
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.transport.abort()

    async def wait_received(self, n: int, timeout: float = 10) -> list[Received]:
        assert self._cond is not None
        async with self._cond:
            await asyncio.wait_for(self._cond.wait_for(lambda: len(self.received) >= n), timeout)
        return list(self.received)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        self._writers.append(writer)
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, body = decode_request(frame)
                rec = Received(
                    conn,
                    int(header.request_api_key),
                    int(header.request_api_version),
                    int(header.correlation_id),
                    body,
                    frame,
                )
                assert self._cond is not None
                async with self._cond:
                    self.received.append(rec)
                    self._cond.notify_all()
                if self.gate is not None:
                    await self.gate.wait()
                if not self.respond:
                    continue
                if rec.api_key == 0 and body.acks == 0:
                    continue
                response = self._response(rec)
                writer.write(encode_response(rec.correlation_id, response))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _response(self, rec: Received) -> Any:
        cls = response_class(rec.api_key, rec.api_version)
        brokers = [{"node_id": i, "broker_id": i, "host": h, "port": p} for i, h, p in self.brokers]
        if rec.api_key == 3:
            return make(cls, {"brokers": brokers, "cluster_id": "fake", "controller_id": 1})
        if rec.api_key == 60:
            return make(cls, {"brokers": brokers, "cluster_id": "fake", "controller_id": 1})
        if rec.api_key == 10:
            node_id, host, port = self.brokers[-1]
            if rec.api_version >= 4:
                coords = [
                    {"key": k, "node_id": node_id, "host": host, "port": port}
                    for k in rec.body.coordinator_keys
                ]
                return make(cls, {"coordinators": coords})
            return make(cls, {"node_id": node_id, "host": host, "port": port})
        if rec.api_key == 0:
            return make(
                cls,
                {
                    "responses": [
                        {
                            "name": "t",
                            "partition_responses": [
                                {"index": 0, "base_offset": len(self.received)}
                            ],
                        }
                    ]
                },
            )
        return make(cls, {})


class RawClient:
    """Pipelining client: send requests, read responses in arrival order."""

    def __init__(self) -> None:
        self._corr = 0
        self.sent: dict[int, tuple[int, int]] = {}
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def connect(self, address: tuple[str, int]) -> RawClient:
        self.reader, self.writer = await asyncio.open_connection(*address)
        return self

    def encode(self, api_key: int, version: int, body: dict[str, Any]) -> tuple[int, bytes]:
        self._corr += 1
        request = make(request_class(api_key, version), body)
        self.sent[self._corr] = (api_key, version)
        return self._corr, encode_request(self._corr, request, "raw-test")

    async def send(self, api_key: int, version: int, body: dict[str, Any] | None = None) -> int:
        corr, data = self.encode(api_key, version, body or {})
        self.writer.write(data)
        await self.writer.drain()
        return corr

    async def recv_frame(self, timeout: float = 10) -> bytes:
        size = _SIZE.unpack(await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    async def recv(self, timeout: float = 10) -> tuple[int, Any]:
        frame = await self.recv_frame(timeout)
        corr = _SIZE.unpack_from(frame, 0)[0]
        api_key, version = self.sent[corr]
        return decode_response(api_key, version, frame)

    async def nothing_within(self, seconds: float) -> bool:
        """True if no byte arrives within ``seconds`` (used only for negative checks)."""
        try:
            await asyncio.wait_for(self.reader.read(1), seconds)
        except TimeoutError:
            return True
        return False

    def close(self) -> None:
        self.writer.close()


async def eventually(pred: Callable[[], bool | Awaitable[bool]], timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = pred()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)
