"""KafkaServer.stop ends the handlers still waiting: once it returns, no handler goes on to
act on the node's state, which the node closes next (a Produce that waited for its KIP-890
verification through a broker's clean restart appended to a segment closed meanwhile)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tests.cluster.coordinator.transactions.txn_support import async_test
from txnchaos.cluster.net.client import PeerConnection, PeerUnavailable
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.protocol.hot_codecs import end_txn_response
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.server.server import KafkaServer

LIMIT = 10.0


class Waiting:
    """EndTxn handlers that wait for ``release`` and then act (``acted``): parked on the
    future itself (producer id 1), or after a bare yield first, which finishes them in a
    task (producer id 2)."""

    def __init__(self) -> None:
        self.release: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting = asyncio.Event()
        self.acted: list[int] = []
        self.cancelled: list[int] = []
        registry = ApiRegistry()
        registry.register(26, 0, 3, self.end_txn, owner="t")
        self.server = KafkaServer(registry)

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        pid = int(req.producer_id)
        try:
            if pid == 2:
                await asyncio.sleep(0)  # a bare yield: the rest runs in a task
            self.waiting.set()
            await self.release
        except asyncio.CancelledError:
            self.cancelled.append(pid)
            raise
        self.acted.append(pid)
        return ctx.encoded(end_txn_response(ctx.api_version, 0))


def end_txn(pid: int) -> Any:
    return make(request_class(26, 1), transactional_id="tx", producer_id=pid, producer_epoch=0)


async def stop_while_waiting(pid: int) -> Waiting:
    peer = Waiting()
    port = await peer.server.start()
    conn = PeerConnection("127.0.0.1", port, client_id="t")
    try:
        request = asyncio.ensure_future(conn.request(end_txn(pid), timeout=LIMIT))
        await asyncio.wait_for(peer.waiting.wait(), LIMIT)
        await peer.server.stop()
        if not peer.release.done():  # a cancelled task cancels what it waited on
            peer.release.set_result(None)  # what it waited for comes after the stop
        for _ in range(5):
            await asyncio.sleep(0)
        with contextlib.suppress(PeerUnavailable):  # the connection closed with the stop
            await request
    finally:
        await conn.close()
    return peer


@async_test
async def test_a_parked_handler_released_after_the_stop_does_not_act() -> None:
    peer = await stop_while_waiting(1)
    assert peer.acted == []
    assert peer.cancelled == [1]


@async_test
async def test_a_handler_finishing_in_a_task_is_cancelled_by_the_stop() -> None:
    peer = await stop_while_waiting(2)
    assert peer.acted == []
    assert peer.cancelled == [2]
