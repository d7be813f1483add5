"""The broker's verification client (TxnVerifier) against a real server that plays
the transaction coordinator: one request in flight per coordinator, the checks that
wait meanwhile go out together, a repeated transactional id replaces the older check,
errors are translated for old clients, and the server-only check refuses clients."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.cluster.coordinator.transactions.txn_support import async_test
from txnchaos.cluster.broker.txn_verification import TxnVerifier
from txnchaos.cluster.coordinator.placement import CoordinatorPlacement
from txnchaos.cluster.server.cluster_action import guard_server_only_apis
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.server.server import KafkaServer

LIMIT = 10.0
NETWORK_EXCEPTION = 13
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120


class Coordinator:
    """Answers VerifyOnly: partition 0 is in every transaction, others are not;
    producer id 9 is fenced, 8 is being prepared. The first request is held until
    ``release`` is set."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.client_ids: list[str | None] = []
        self.first_arrived = asyncio.Event()
        self.release = asyncio.Event()
        registry = ApiRegistry()
        registry.register(24, 0, 5, self.handle, owner="t")
        guard_server_only_apis(registry)
        self.server = KafkaServer(registry)

    async def handle(self, ctx: RequestContext, req: Any) -> Any:
        self.requests.append(req)
        self.client_ids.append(ctx.client_id)
        if len(self.requests) == 1:
            self.first_arrived.set()
            await self.release.wait()
        results = []
        for txn in req.transactions:
            topics = []
            for t in txn.topics:
                parts = []
                for p in t.partitions:
                    if txn.producer_id == 9:
                        code = PRODUCER_FENCED
                    elif txn.producer_id == 8:
                        code = CONCURRENT_TRANSACTIONS
                    else:
                        code = 0 if p == 0 else TRANSACTION_ABORTABLE
                    parts.append({"partition_index": p, "partition_error_code": code})
                topics.append({"name": t.name, "results_by_partition": parts})
            results.append({"transactional_id": txn.transactional_id, "topic_results": topics})
        return ctx.respond(throttle_time=0, error_code=0, results_by_transaction=results)


async def started(client_id: str = "txnchaos-node-1") -> tuple[Coordinator, TxnVerifier]:
    coordinator = Coordinator()
    port = await coordinator.server.start()
    verifier = TxnVerifier(
        lambda: CoordinatorPlacement((1,)),
        lambda node: ("127.0.0.1", port),
        client_id=client_id,
    )
    return coordinator, verifier


@async_test
async def test_checks_wait_together_behind_the_request_in_flight() -> None:
    coordinator, verifier = await started()
    try:
        first = asyncio.ensure_future(verifier.verify("a", 1, 0, [("t", 0), ("t", 1)]))
        await asyncio.wait_for(coordinator.first_arrived.wait(), LIMIT)
        retried = asyncio.ensure_future(verifier.verify("b", 2, 0, [("t", 0)]))
        other = asyncio.ensure_future(verifier.verify("c", 9, 3, [("t", 0)]))
        prepared = asyncio.ensure_future(verifier.verify("d", 8, 0, [("t", 5)]))
        await asyncio.sleep(0)  # let them queue
        # "b" again with the same epoch (a client retry): the waiting check answers
        # NETWORK_EXCEPTION and the new one takes its place.
        again = asyncio.ensure_future(verifier.verify("b", 2, 0, [("t", 0), ("u", 2)]))
        assert await asyncio.wait_for(retried, LIMIT) == {("t", 0): NETWORK_EXCEPTION}
        coordinator.release.set()
        assert await asyncio.wait_for(first, LIMIT) == {("t", 1): INVALID_TXN_STATE}
        assert await asyncio.wait_for(again, LIMIT) == {("u", 2): INVALID_TXN_STATE}
        assert await asyncio.wait_for(other, LIMIT) == {("t", 0): INVALID_PRODUCER_EPOCH}
        assert await asyncio.wait_for(prepared, LIMIT) == {("t", 5): CONCURRENT_TRANSACTIONS}
        assert len(coordinator.requests) == 2
        batched = {t.transactional_id: t for t in coordinator.requests[1].transactions}
        assert sorted(batched) == ["b", "c", "d"]
        assert [(t.name, t.partitions) for t in batched["b"].topics] == [("t", (0,)), ("u", (2,))]
        assert all(t.verify_only for r in coordinator.requests for t in r.transactions)
        stats = verifier.stats
        assert (stats.time_ms_count, stats.failures) == (5, 5)
    finally:
        await verifier.close()
        await coordinator.server.stop()


@async_test
async def test_a_lower_epoch_than_the_waiting_check_is_fenced_at_once() -> None:
    coordinator, verifier = await started()
    try:
        first = asyncio.ensure_future(verifier.verify("a", 1, 0, [("t", 0)]))
        await asyncio.wait_for(coordinator.first_arrived.wait(), LIMIT)
        newer = asyncio.ensure_future(verifier.verify("b", 2, 5, [("t", 0)]))
        await asyncio.sleep(0)
        assert await verifier.verify("b", 2, 4, [("t", 0)]) == {("t", 0): INVALID_PRODUCER_EPOCH}
        coordinator.release.set()
        assert await asyncio.wait_for(first, LIMIT) == {}
        assert await asyncio.wait_for(newer, LIMIT) == {}
    finally:
        await verifier.close()
        await coordinator.server.stop()


@async_test
async def test_a_client_that_is_not_a_node_is_refused() -> None:
    coordinator, verifier = await started(client_id="some-client")
    coordinator.release.set()
    try:
        # CLUSTER_AUTHORIZATION_FAILED never reaches the producer: INVALID_TXN_STATE.
        assert await verifier.verify("a", 1, 0, [("t", 0)]) == {("t", 0): INVALID_TXN_STATE}
        assert coordinator.requests == []  # refused before the handler
    finally:
        await verifier.close()
        await coordinator.server.stop()


@async_test
async def test_an_unreachable_coordinator_is_a_network_error() -> None:
    verifier = TxnVerifier(
        lambda: CoordinatorPlacement((1,)), lambda node: ("127.0.0.1", 1), client_id="n"
    )
    try:
        assert await verifier.verify("a", 1, 0, [("t", 0)]) == {("t", 0): NETWORK_EXCEPTION}
    finally:
        await verifier.close()
