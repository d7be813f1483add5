"""PeerConnection: pipelined requests over the Protocol-based client, and the callback
path (``request_nowait``) the coordinator's markers use: answers, timeouts, lost
connections. The marker sender over it, with a flush that waits for callback sends."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.cluster.coordinator.transactions.txn_support import async_test
from txnchaos.cluster.coordinator.transactions.marker_sender import (
    MarkerSender,
    MarkerSpec,
    Outcome,
    PeerMarkerTransport,
)
from txnchaos.cluster.net.client import PeerConnection, PeerUnavailable
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.protocol.hot_codecs import end_txn_response, write_txn_markers_response
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.server.server import KafkaServer

LIMIT = 10.0


def end_txn(code: int) -> Any:
    return make(request_class(26, 1), transactional_id="tx", producer_id=code, producer_epoch=0)


class Peer:
    """A server answering EndTxn with error code = producer id, except producer id 99,
    which is never answered."""

    def __init__(self) -> None:
        self.never = asyncio.Event()
        self.markers: list[Any] = []
        registry = ApiRegistry()
        registry.register(26, 0, 3, self.end_txn, owner="t")
        registry.register(27, 1, 2, self.write_txn_markers, owner="t")
        self.server = KafkaServer(registry)

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        if req.producer_id == 99:
            await self.never.wait()
        return ctx.encoded(end_txn_response(ctx.api_version, int(req.producer_id)))

    async def write_txn_markers(self, ctx: RequestContext, req: Any) -> Any:
        self.markers.append(req)
        body = write_txn_markers_response(
            ctx.api_version,
            [
                (m.producer_id, [(t.name, [(p, 0) for p in t.partition_indexes]) for t in m.topics])
                for m in req.markers
            ],
        )
        return ctx.encoded(body)


class Answers:
    def __init__(self) -> None:
        self.got: list[tuple[Any, BaseException | None]] = []
        self.changed = asyncio.Event()

    def __call__(self, response: Any, error: BaseException | None) -> None:
        self.got.append((response, error))
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        while len(self.got) < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), LIMIT)


@asynccontextmanager
async def connected_to_peer() -> AsyncIterator[tuple[Peer, PeerConnection, Answers]]:
    """A started Peer, a PeerConnection to it (not yet connected) and an answer sink; on exit
    held requests are released, the connection closed and the server stopped."""
    peer = Peer()
    port = await peer.server.start()
    conn = PeerConnection("127.0.0.1", port, client_id="t")
    try:
        yield peer, conn, Answers()
    finally:
        peer.never.set()
        await conn.close()
        await peer.server.stop()


@async_test
async def test_request_and_request_nowait_share_the_connection() -> None:
    async with connected_to_peer() as (_, conn, answers):
        assert not conn.request_nowait(end_txn(1), LIMIT, answers)  # not connected yet
        assert int((await conn.request(end_txn(2), timeout=LIMIT)).error_code) == 2
        for code in (3, 4, 5):
            assert conn.request_nowait(end_txn(code), LIMIT, answers)
        reply = await conn.request(end_txn(6), timeout=LIMIT)
        await answers.wait_for(3)
        assert [int(r.error_code) for r, e in answers.got] == [3, 4, 5]
        assert all(e is None for _, e in answers.got)
        assert int(reply.error_code) == 6


@async_test
async def test_request_nowait_times_out_and_closes_the_connection() -> None:
    async with connected_to_peer() as (_, conn, answers):
        await conn.request(end_txn(1), timeout=LIMIT)
        assert conn.request_nowait(end_txn(99), 0.05, answers)  # never answered
        await answers.wait_for(1)
        response, error = answers.got[0]
        assert response is None and isinstance(error, PeerUnavailable)
        assert "timed out" in str(error)
        assert not conn.connected
        # the next request connects again
        assert int((await conn.request(end_txn(7), timeout=LIMIT)).error_code) == 7


@async_test
async def test_a_lost_connection_fails_the_callbacks() -> None:
    async with connected_to_peer() as (peer, conn, answers):
        await conn.request(end_txn(1), timeout=LIMIT)
        assert conn.request_nowait(end_txn(99), LIMIT, answers)
        await peer.server.stop()  # closes every connection
        await answers.wait_for(1)
        assert isinstance(answers.got[0][1], PeerUnavailable)


class ResettingListener:
    """A listener on its own thread that resets every connection it accepts within a
    millisecond: a fault proxy whose node is down (it accepts, cannot reach the node, and
    RSTs the client). The reset lands at varied points of the connecting side's set-up,
    often between the connection being made and being taken into use."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.random = random.Random(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            time.sleep(self.random.uniform(0, 0.001))
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join()


@async_test
async def test_a_connection_reset_while_connecting_fails_the_request() -> None:
    """The reset can arrive before the connection is taken into use: the request fails
    as the connection's loss, never written into the closed connection to wait out its
    whole timeout (a broker's KIP-890 verification held 30 s behind a restarting
    coordinator's proxy so)."""
    listener = ResettingListener()
    conn = PeerConnection("127.0.0.1", listener.port, client_id="t", stall_probe_s=0.05)
    try:
        for _ in range(100):
            with pytest.raises(PeerUnavailable) as failed:
                await conn.request(end_txn(1), timeout=LIMIT)
            assert "timed out" not in str(failed.value)
    finally:
        await conn.close()
        listener.close()


@async_test
async def test_marker_sender_flush_waits_for_callback_sends() -> None:
    peer = Peer()
    port = await peer.server.start()
    transport = PeerMarkerTransport(lambda node: ("127.0.0.1", port))
    done: list[tuple[tuple[str, int], Outcome]] = []

    class Routing:
        def leader(self, topic: str, partition: int) -> int | None:
            return 1

        def exists(self, topic: str, partition: int) -> bool:
            return True

        async def refresh(self) -> None:
            return None

    sender = MarkerSender(transport, Routing(), lambda s, tp, o: done.append((tp, o)))
    try:
        sender.enqueue(MarkerSpec("a", 0, 10, 0, True, 1), {("t", 0)})
        await sender.flush()  # connects: the first request takes the async path
        sender.enqueue(MarkerSpec("b", 0, 11, 0, False, 1), {("t", 1), ("t", 2)})
        await sender.flush()  # connected: send_nowait, answered through a callback
        assert sorted(done) == [
            (("t", 0), Outcome.WRITTEN),
            (("t", 1), Outcome.WRITTEN),
            (("t", 2), Outcome.WRITTEN),
        ]
        assert sender.idle
        assert [[m.producer_id for m in r.markers] for r in peer.markers] == [[10], [11]]
        assert sorted(peer.markers[1].markers[0].topics[0].partition_indexes) == [1, 2]
    finally:
        await sender.stop()
        await peer.server.stop()
