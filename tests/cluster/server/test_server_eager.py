"""The protocol server starts handlers in its data callback: handlers that finish at once
are answered there, handlers that wait are resumed from what they wait on, and
everything stays in order per connection. Also ``eager_task``."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.cluster.coordinator.transactions.txn_support import async_test
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import decode_response, encode_request, request_class
from txnchaos.cluster.protocol.hot_codecs import end_txn_response
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.server.eager import eager_task
from txnchaos.cluster.server.server import KafkaServer

END_TXN, ADD_OFFSETS, ADD_PARTITIONS, INIT = 26, 25, 24, 22
LIMIT = 10.0  # generous bound for every wait; nothing here depends on timing


class Handlers:
    """EndTxn answers at once (error code = producer id); AddPartitionsToTxn waits for
    ``release``; AddOffsetsToTxn yields to the loop once; InitProducerId fails."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.held = asyncio.Event()

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        return ctx.encoded(end_txn_response(ctx.api_version, int(req.producer_id)))

    async def add_partitions(self, ctx: RequestContext, req: Any) -> Any:
        self.held.set()
        await self.release.wait()
        return ctx.respond(throttle_time=0, results_by_topic_v3_and_below=[])

    async def add_offsets(self, ctx: RequestContext, req: Any) -> Any:
        await asyncio.sleep(0)  # a bare yield: not a future to park on
        return ctx.respond(throttle_time=0, error_code=int(req.producer_id))

    async def init(self, ctx: RequestContext, req: Any) -> Any:
        raise RuntimeError("a bug in a handler")

    def registry(self) -> ApiRegistry:
        registry = ApiRegistry()
        registry.register(END_TXN, 0, 3, self.end_txn, owner="t")
        registry.register(ADD_PARTITIONS, 0, 3, self.add_partitions, owner="t")
        registry.register(ADD_OFFSETS, 0, 3, self.add_offsets, owner="t")
        registry.register(INIT, 0, 4, self.init, owner="t")
        return registry


def end_txn(correlation_id: int, code: int) -> bytes:
    req = make(
        request_class(END_TXN, 1),
        transactional_id="tx",
        producer_id=code,
        producer_epoch=0,
        committed=True,
    )
    return encode_request(correlation_id, req, "c")


def add_partitions(correlation_id: int) -> bytes:
    req = make(
        request_class(ADD_PARTITIONS, 1),
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[{"name": "t", "partitions": [0]}],
    )
    return encode_request(correlation_id, req, "c")


def add_offsets(correlation_id: int, code: int) -> bytes:
    req = make(
        request_class(ADD_OFFSETS, 1),
        transactional_id="tx",
        producer_id=code,
        producer_epoch=0,
        group_id="g",
    )
    return encode_request(correlation_id, req, "c")


def init(correlation_id: int) -> bytes:
    req = make(request_class(INIT, 1), transactional_id="tx", transaction_timeout=1000)
    return encode_request(correlation_id, req, "c")


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, *frames: bytes) -> None:
        self.writer.write(b"".join(frames))
        await self.writer.drain()

    async def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), LIMIT))
        frame = await asyncio.wait_for(self.reader.readexactly(size), LIMIT)
        return decode_response(api_key, version, frame)

    async def closed(self) -> bool:
        """True once the server closed the connection (reads EOF)."""
        try:
            data = await asyncio.wait_for(self.reader.read(), LIMIT)
        except ConnectionError:
            return True
        return data == b""


@asynccontextmanager
async def serving(handlers: Handlers) -> AsyncIterator[tuple[KafkaServer, Callable[[], Any]]]:
    server = KafkaServer(handlers.registry(), max_frame_bytes=1 << 16)
    port = await server.start()
    clients: list[Client] = []

    async def connect() -> Client:
        client = Client(*await asyncio.open_connection("127.0.0.1", port))
        clients.append(client)
        return client

    try:
        yield server, connect
    finally:
        for client in clients:
            client.writer.close()
        await server.stop()


@async_test
async def test_pipelined_requests_are_answered_in_order_around_a_held_one() -> None:
    handlers = Handlers()
    async with serving(handlers) as (_, connect):
        client = await connect()
        await client.send(end_txn(1, 11), add_partitions(2), end_txn(3, 33))
        correlation_id, first = await client.receive(END_TXN, 1)
        assert (correlation_id, int(first.error_code)) == (1, 11)
        await asyncio.wait_for(handlers.held.wait(), LIMIT)
        # The third request waits behind the held one (Kafka mutes the connection): the
        # next frame to arrive must be the held request's answer.
        handlers.release.set()
        correlation_id, _ = await client.receive(ADD_PARTITIONS, 1)
        assert correlation_id == 2
        correlation_id, last = await client.receive(END_TXN, 1)
        assert (correlation_id, int(last.error_code)) == (3, 33)


@async_test
async def test_a_handler_that_yields_without_a_future_is_finished_in_a_task() -> None:
    async with serving(Handlers()) as (_, connect):
        client = await connect()
        await client.send(add_offsets(5, 7), end_txn(6, 8))
        correlation_id, response = await client.receive(ADD_OFFSETS, 1)
        assert (correlation_id, int(response.error_code)) == (5, 7)
        correlation_id, response = await client.receive(END_TXN, 1)
        assert (correlation_id, int(response.error_code)) == (6, 8)


@async_test
async def test_frames_split_anywhere_are_reassembled() -> None:
    async with serving(Handlers()) as (_, connect):
        client = await connect()
        data = end_txn(1, 1) + end_txn(2, 2) + end_txn(3, 3)
        for i in range(len(data)):
            await client.send(data[i : i + 1])
        answers = [await client.receive(END_TXN, 1) for _ in range(3)]
        assert [(c, int(r.error_code)) for c, r in answers] == [(1, 1), (2, 2), (3, 3)]


@async_test
async def test_a_failing_handler_closes_only_its_connection() -> None:
    async with serving(Handlers()) as (_, connect):
        other = await connect()
        client = await connect()
        await client.send(end_txn(1, 4), init(2), end_txn(3, 5))
        correlation_id, _ = await client.receive(END_TXN, 1)  # answered before the failure
        assert correlation_id == 1
        assert await client.closed()
        await other.send(end_txn(9, 9))
        assert (await other.receive(END_TXN, 1))[0] == 9


@async_test
async def test_a_failing_held_handler_closes_its_connection() -> None:
    handlers = Handlers()

    async def fail_after_wait(ctx: RequestContext, req: Any) -> Any:
        await handlers.release.wait()
        raise RuntimeError("a bug after a wait")

    handlers.add_partitions = fail_after_wait  # type: ignore[method-assign]
    async with serving(handlers) as (_, connect):
        client = await connect()
        await client.send(add_partitions(1))
        await asyncio.sleep(0)
        handlers.release.set()
        assert await client.closed()


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@async_test
async def test_a_held_handler_whose_wait_is_cancelled_closes_quietly() -> None:
    """A node that stops cancels what its parked handlers wait on: the connection closes and
    nothing is logged as an error (the run's node-error finding reads those)."""
    handlers = Handlers()
    waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def wait_cancelled(ctx: RequestContext, req: Any) -> Any:
        handlers.held.set()
        await waited
        return ctx.respond(throttle_time=0, results_by_topic_v3_and_below=[])

    handlers.add_partitions = wait_cancelled  # type: ignore[method-assign]
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:
        async with serving(handlers) as (_, connect):
            client = await connect()
            await client.send(add_partitions(1))
            await asyncio.wait_for(handlers.held.wait(), LIMIT)
            waited.cancel()
            assert await client.closed()
    finally:
        logging.getLogger().removeHandler(errors)
    assert [r.getMessage() for r in errors.records] == []


@async_test
async def test_oversized_frames_close_the_connection() -> None:
    async with serving(Handlers()) as (server, connect):
        client = await connect()
        await client.send(struct.pack(">i", (1 << 16) + 1) + b"\0" * 8)
        assert await client.closed()
        assert server.protocol_errors == 1


@async_test
async def test_requests_sent_before_eof_are_still_answered() -> None:
    handlers = Handlers()
    async with serving(handlers) as (_, connect):
        client = await connect()
        await client.send(add_partitions(1), end_txn(2, 2))
        client.writer.write_eof()
        await asyncio.wait_for(handlers.held.wait(), LIMIT)
        handlers.release.set()
        assert (await client.receive(ADD_PARTITIONS, 1))[0] == 1
        assert (await client.receive(END_TXN, 1))[0] == 2
        assert await client.closed()


# -- eager_task ----------------------------------------------------------------------------


@async_test
async def test_eager_task_runs_the_first_step_now() -> None:
    steps: list[str] = []
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def quick() -> int:
        steps.append("quick")
        return 1

    async def waits() -> int:
        steps.append("waits: before")
        value = await gate
        steps.append("waits: after")
        return value + 1

    async def fails() -> int:
        raise ValueError("boom")

    done = eager_task(quick())
    assert steps == ["quick"] and done.done() and done.result() == 1
    pending = eager_task(waits())
    assert steps == ["quick", "waits: before"] and not pending.done()
    gate.set_result(41)
    assert await asyncio.wait_for(pending, LIMIT) == 42
    failed = eager_task(fails())
    assert failed.done()
    with pytest.raises(ValueError):
        failed.result()


@async_test
async def test_eager_task_can_be_cancelled_while_it_waits() -> None:
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cleaned = []

    async def waits() -> None:
        try:
            await gate
        finally:
            cleaned.append(True)

    task = eager_task(waits())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, LIMIT)
    assert cleaned == [True]
