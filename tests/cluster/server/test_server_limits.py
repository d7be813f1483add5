"""The server's limits (``cluster.server.limits``): connections, queued requests, request
memory and idle time, checked on a real KafkaServer over real sockets in this process.
Waits are on the server's own state, never on elapsed time."""

from __future__ import annotations

import asyncio
import re
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import decode_response, encode_request, request_class
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.server.limits import ConnectionLimits, RequestMemory, RequestQueue
from txnchaos.cluster.server.server import KafkaServer, register_api_versions

MIB = 1024 * 1024


def api_versions(correlation_id: int = 1, tail: int = 0) -> bytes:
    """An ApiVersions v3 frame, with ``tail`` bytes after its body (which Kafka ignores)."""
    req = make(request_class(18, 3), client_software_name="t", client_software_version="1")
    frame = encode_request(correlation_id, req, "t")
    if not tail:
        return frame
    body = frame[4:] + b"\0" * tail
    return struct.pack(">i", len(body)) + body


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


@asynccontextmanager
async def serving(limits: ConnectionLimits, max_frame: int = MIB) -> AsyncIterator[KafkaServer]:
    registry = ApiRegistry()
    server = KafkaServer(registry, max_frame_bytes=max_frame, limits=limits)
    register_api_versions(registry, server)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def holding_metadata(
    limits: ConnectionLimits,
) -> AsyncIterator[tuple[KafkaServer, asyncio.Event]]:
    """A server (ApiVersions and Metadata) whose Metadata requests wait until the yielded
    event is set."""
    registry = ApiRegistry()
    server = KafkaServer(registry, limits=limits)
    gate = asyncio.Event()

    async def held_metadata(ctx: RequestContext, request: Any) -> Any:
        await gate.wait()
        return ctx.respond(throttle_time=0, brokers=[], topics=[])

    registry.register(3, 0, 12, held_metadata, owner="test")
    register_api_versions(registry, server)
    await server.start()
    try:
        yield server, gate
    finally:
        await server.stop()


async def answer(reader: asyncio.StreamReader) -> int:
    """The correlation id of the next ApiVersions response."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    correlation_id, response = decode_response(18, 3, await reader.readexactly(size))
    assert response.error_code == 0
    return correlation_id


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 10) == b""
    except ConnectionError:
        return True


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_connections_over_max_connections_are_closed() -> None:
    async def scenario() -> None:
        async with serving(ConnectionLimits(max_connections=2)) as server:
            kept = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
            await until(lambda: server.connection_count == 2, "two connections")
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            assert await closed_by_peer(reader)
            assert server.refused_connections == 1
            for i, (r, w) in enumerate(kept):
                w.write(api_versions(i))
                assert await answer(r) == i
            kept[0][1].close()
            await until(lambda: server.connection_count == 1, "one closed")
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(api_versions(7))
            assert await answer(reader) == 7
            for _, w in [*kept, (reader, writer)]:
                w.close()

    run(scenario())


def test_connections_over_max_connections_per_ip_are_closed() -> None:
    async def scenario() -> None:
        async with serving(ConnectionLimits(max_connections_per_ip=1)) as server:
            first = await asyncio.open_connection("127.0.0.1", server.port)
            await until(lambda: server.connection_count == 1, "one connection")
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            assert await closed_by_peer(reader)
            first[1].write(api_versions(3))
            assert await answer(first[0]) == 3
            first[1].close()
            writer.close()

    run(scenario())


def test_a_large_claim_waits_for_request_memory_and_is_then_served() -> None:
    """Two connections claim 1 MiB each and stall: the pool (two such frames) is full, so
    a third large request waits, and is answered once a staller goes away."""

    async def scenario() -> None:
        pool = 2 * (MIB + 4)
        async with serving(ConnectionLimits(queued_max_request_bytes=pool)) as server:
            stallers = []
            for _ in range(2):
                r, w = await asyncio.open_connection("127.0.0.1", server.port)
                w.write(struct.pack(">i", MIB) + b"\0")
                stallers.append((r, w))
            await until(lambda: server.memory.reserved == pool, "both claims reserved")
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            big = api_versions(42, tail=512 * 1024)
            writer.write(big)
            await until(lambda: server.memory.waiting == 1, "the third claim waits")
            stallers[0][1].close()
            assert await asyncio.wait_for(answer(reader), 30) == 42
            await until(lambda: server.memory.reserved == MIB + 4, "the served claim released")
            writer.close()
            stallers[1][1].close()
            await until(lambda: server.memory.reserved == 0, "all released on close")

    run(scenario())


def test_claims_without_data_allocate_nothing() -> None:
    """200 connections each claim ~100 MiB and send one byte: the node's memory follows
    the bytes received (each connection keeps its usual buffer)."""

    async def scenario() -> None:
        limit = 100 * MIB
        async with serving(ConnectionLimits(), max_frame=limit) as server:
            conns = []
            for _ in range(200):
                r, w = await asyncio.open_connection("127.0.0.1", server.port)
                w.write(struct.pack(">i", limit - 8))
                conns.append((r, w))
            await until(lambda: server.memory.waiting == 198, "198 claims wait for memory")
            for _, w in conns:  # a byte in a read of its own: the buffer may grow now
                w.write(b"x")
            received = 200 * 4 + 2  # the waiting connections read no further
            await until(
                lambda: sum(c._reads.buffered for c in server._connections.values()) == received,
                "the two reserved connections read their byte",
            )
            held = sum(c._reads.capacity for c in server._connections.values())
            assert held <= 200 * 64 * 1024
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(api_versions(5))
            assert await answer(reader) == 5  # small requests go on meanwhile
            for _, w in [*conns, (reader, writer)]:
                w.close()
            await until(lambda: server.memory.reserved == 0, "all released")

    run(scenario())


def test_a_silent_connection_is_closed_after_connections_max_idle_ms() -> None:
    async def scenario() -> None:
        async with serving(ConnectionLimits(connections_max_idle_ms=100)) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(struct.pack(">i", 2 * MIB // 2) + b"\0")  # a claim, then silence
            assert await closed_by_peer(reader)
            assert server.idle_closed == 1
            await until(lambda: server.memory.reserved == 0, "its reservation released")
            writer.close()

    run(scenario())


def test_queued_requests_past_the_limit_stop_reading_until_they_drain() -> None:
    async def scenario() -> None:
        async with holding_metadata(ConnectionLimits(queued_max_requests=2)) as (server, gate):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            metadata = make(request_class(3, 1), topics=[])
            writer.write(encode_request(100, metadata, "t"))
            writer.write(b"".join(api_versions(i) for i in range(3)))
            await until(lambda: server.queue.queued == 3, "three requests queued")
            (conn,) = server._connections.values()
            assert "queue" in conn._read_stops
            gate.set()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
            assert [await answer(reader) for _ in range(3)] == [0, 1, 2]
            await until(lambda: server.queue.queued == 0, "drained")
            assert not conn._read_stops
            writer.close()

    run(scenario())


def test_requests_stuck_behind_a_long_wait_do_not_stop_other_connections() -> None:
    """Found by `txnchaos fuzz`: frames queued behind a request that waits for minutes
    filled queued.max.requests, and every other connection was then stopped after its
    next request until that wait ended (their clients' closes unseen, the connections
    piled up to max.connections)."""

    async def scenario() -> None:
        async with holding_metadata(ConnectionLimits(queued_max_requests=2)) as (server, gate):
            _, held = await asyncio.open_connection("127.0.0.1", server.port)
            held.write(encode_request(100, make(request_class(3, 1), topics=[]), "t"))
            held.write(b"".join(api_versions(i) for i in range(2)))
            await until(lambda: server.queue.queued == 2, "two requests stuck behind it")
            assert server.queue.full
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for correlation_id in (10, 11, 12):  # one at a time: each read queues one
                writer.write(api_versions(correlation_id))
                # bounded: before the fix the second one was never read
                assert await asyncio.wait_for(answer(reader), 30) == correlation_id
            other = next(c for c in server._connections.values() if not c._busy)
            assert not other._read_stops
            assert server.queue.queued == 2  # the stuck ones are still counted
            gate.set()
            writer.close()
            held.close()

    run(scenario())


def test_a_connection_not_being_read_is_closed_once_its_client_is_gone() -> None:
    """Found by `txnchaos fuzz`: a connection stopped by queued.max.requests (its request
    held, frames behind it) did not see its client close it, and kept its connection
    slot and queued requests until the held request ended."""

    async def scenario() -> None:
        async with holding_metadata(ConnectionLimits(queued_max_requests=2)) as (server, gate):
            _, held = await asyncio.open_connection("127.0.0.1", server.port)
            held.write(encode_request(100, make(request_class(3, 1), topics=[]), "t"))
            held.write(b"".join(api_versions(i) for i in range(3)))
            await until(lambda: server.queue.queued == 3, "three requests behind the held one")
            (conn,) = server._connections.values()
            assert "queue" in conn._read_stops
            held.transport.abort()  # as a client that gives up
            await until(lambda: server.connection_count == 0, "the connection closed")
            assert server.queue.queued == 0 and server.dead_closed == 1
            gate.set()

    run(scenario())


def test_a_connection_past_its_end_of_input_is_closed_once_its_client_is_gone() -> None:
    """Found by `txnchaos fuzz`: requests sent before the end of a client's input are
    still answered, so the connection stays open for a held one; asyncio reads no more
    then, so a client that went away for good was not seen, and such connections piled
    up to max.connections while their requests waited."""

    async def scenario() -> None:
        async with holding_metadata(ConnectionLimits()) as (server, gate):
            _, held = await asyncio.open_connection("127.0.0.1", server.port)
            held.write(encode_request(100, make(request_class(3, 1), topics=[]), "t"))
            held.write_eof()
            await until(lambda: any(c._eof for c in server._connections.values()), "its end")
            (conn,) = server._connections.values()
            assert conn._busy
            sock = held.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            held.transport.abort()  # gone for good: a reset
            await until(lambda: server.connection_count == 0, "the connection closed")
            assert server.dead_closed == 1
            gate.set()

    run(scenario())


def test_request_memory_grants_whole_reservations_in_arrival_order() -> None:
    memory = RequestMemory(10)
    granted: list[str] = []
    assert memory.try_reserve(1, 6, lambda: granted.append("1"))
    assert not memory.try_reserve(2, 6, lambda: granted.append("2"))
    assert not memory.try_reserve(3, 1, lambda: granted.append("3"))  # no jumping the queue
    memory.release(6)
    assert granted == ["2", "3"] and memory.reserved == 7
    memory.forget(2)  # already granted: nothing changes
    with pytest.raises(ValueError):
        memory.try_reserve(4, 11, lambda: None)


def test_request_queue_resumes_stopped_connections_oldest_first() -> None:
    queue = RequestQueue(2)
    resumed: list[int] = []
    queue.add(2)
    assert queue.full
    queue.stop(1, lambda: resumed.append(1))
    queue.stop(2, lambda: resumed.append(2))
    queue.forget(2)
    queue.remove(1)
    assert resumed == [1]


@pytest.mark.parametrize(
    "field", ["max_connections", "queued_max_requests", "connections_max_idle_ms"]
)
def test_limits_below_one_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field.replace("_", "."))):
        ConnectionLimits(**{field: 0})


def test_a_pool_smaller_than_one_frame_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("queued.max.request.bytes")):
        KafkaServer(ApiRegistry(), max_frame_bytes=MIB, limits=ConnectionLimits(1, 1, 1, MIB))
