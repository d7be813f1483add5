"""Transaction markers: routing, retries, drops, timeouts with epoch bumps, and the
restart of a coordinator between PrepareCommit and its markers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_FENCED,
    INVALID_PRODUCER_EPOCH,
    NONE,
    NOT_LEADER,
    PRODUCER_FENCED,
    UNKNOWN_TOPIC_OR_PARTITION,
    FakeTransport,
    Harness,
    async_test,
)
from txnchaos.cluster.coordinator.transactions import (
    MarkerSender,
    MarkerSpec,
    Outcome,
    PeerMarkerTransport,
    ViewRouting,
)
from txnchaos.cluster.metadata import NO_LEADER, ClusterView, TopicMeta
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.server.server import KafkaServer


async def open_txn(h: Harness, parts: dict[str, list[int]]) -> tuple[int, int]:
    err, pid, epoch = await h.init()
    assert err == NONE
    assert set((await h.add(pid, epoch, parts)).values()) == {NONE}
    return pid, epoch


@async_test
async def test_markers_grouped_per_leader(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    h.routing.leaders = {"t1": 1, "t2": 2}
    pid, epoch = await open_txn(h, {"t1": [0, 1, 2], "t2": [0]})
    await h.end(pid, epoch, True)
    await h.flush()
    by_node = {m["node"]: m["tps"] for m in h.transport.markers()}
    assert by_node == {1: [("t1", 0), ("t1", 1), ("t1", 2)], 2: [("t2", 0)]}
    assert len(h.transport.requests) == 2
    # v2 (KIP-890): the marker says which transaction version wrote it
    assert type(h.transport.requests[0][1]).__version__ == 2
    assert {m.transaction_version for _, r in h.transport.requests for m in r.markers} == {0}
    assert h.state() == "CompleteCommit"


@async_test
async def test_transient_marker_errors_are_retried_with_backoff(tmp_path: Path) -> None:
    h = Harness(tmp_path, marker_retry_backoff_ms=100).start()
    pid, epoch = await open_txn(h, {"t1": [0, 1]})
    h.transport.script = {("t1", 0): [NOT_LEADER, UNKNOWN_TOPIC_OR_PARTITION]}
    await h.end(pid, epoch, True)
    await h.flush()
    assert h.state() == "PrepareCommit"
    assert h.coordinator.describe("tx").partitions == (("t1", 0),)  # t1-1 is done
    assert h.routing.refreshes >= 1
    h.clock.advance(99)
    await h.flush()
    assert len(h.transport.requests) == 1  # still backing off
    h.clock.advance(1)
    await h.flush()
    assert h.state() == "PrepareCommit"  # second error: backoff doubled to 200 ms
    h.clock.advance(200)
    await h.flush()
    assert h.state() == "CompleteCommit"
    assert [m["tps"] for m in h.transport.markers()] == [
        [("t1", 0), ("t1", 1)],
        [("t1", 0)],
        [("t1", 0)],
    ]
    assert h.coordinator.markers.stats.retries == 2


@async_test
async def test_unreachable_node_and_unknown_leader_are_retried(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, epoch = await open_txn(h, {"t1": [0], "t2": [0]})
    h.routing.leaders = {"t1": 1, "t2": None}
    h.transport.down = {1}
    await h.end(pid, epoch, False)
    for _ in range(5):
        await h.flush()
        h.clock.advance(1_000)
    assert h.state() == "PrepareAbort"
    assert (await h.end(pid, epoch, False)) == CONCURRENT_TRANSACTIONS
    # The nodes come back: the abort completes.
    h.transport.down = set()
    h.routing.leaders = {"t1": 1, "t2": 2}
    await h.flush()
    assert h.state() == "CompleteAbort"
    assert (await h.end(pid, epoch, False)) == NONE


@async_test
async def test_obsolete_markers_are_dropped_and_the_transaction_completes(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, epoch = await open_txn(h, {"t1": [0, 1, 2]})
    h.transport.script = {("t1", 0): [INVALID_PRODUCER_EPOCH], ("t1", 1): [COORDINATOR_FENCED]}
    await h.end(pid, epoch, True)
    await h.flush()
    assert h.state() == "CompleteCommit"
    assert h.coordinator.markers.stats.markers_dropped == 2
    assert len(h.transport.requests) == 1


@async_test
async def test_deleted_topic_marker_is_dropped_after_refreshes(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, epoch = await open_txn(h, {"t1": [0], "t2": [1]})
    del h.routing.topics["t2"]  # topic deleted while the transaction was open
    await h.end(pid, epoch, True)
    for _ in range(4):
        await h.flush()
        h.clock.advance(1_000)
    assert h.state() == "CompleteCommit"
    assert h.coordinator.markers.stats.markers_dropped == 1


@async_test
async def test_timed_out_transaction_is_aborted_with_epoch_bump(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, epoch = await h.init(timeout_ms=5_000)
    await h.add(pid, epoch, {"t1": [0]})
    h.clock.advance(5_000)
    assert h.coordinator.abort_timed_out_transactions() == []
    h.clock.advance(1)
    assert h.coordinator.abort_timed_out_transactions() == ["tx"]
    md = h.coordinator.metadata("tx")
    assert md is not None and md.state.value == "PrepareAbort" and md.producer_epoch == epoch + 1
    await h.flush()
    assert h.transport.markers()[0]["epoch"] == epoch + 1
    assert not h.transport.markers()[0]["commit"]
    assert h.state() == "CompleteAbort"
    # The zombie producer is fenced everywhere.
    assert await h.end(pid, epoch, True) == PRODUCER_FENCED
    assert await h.end(pid, epoch, True, version=0) == INVALID_PRODUCER_EPOCH
    assert (await h.add(pid, epoch, {"t1": [0]}))[("t1", 0)] == PRODUCER_FENCED
    assert h.coordinator.counters.transactions_timed_out == 1
    # Its replacement initialises normally.
    assert await h.init() == (NONE, pid, epoch + 2)


@async_test
async def test_restart_between_prepare_commit_and_markers_completes_commit(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path).start()
    pid, epoch = await open_txn(h, {"t1": [0, 1], "t2": [0]})
    p = h.coordinator.partition_for("tx")
    old_epoch = h.coordinator.coordinator_epoch(p)
    assert await h.end(pid, epoch, True) == NONE
    # kill -9 before any marker is sent
    fresh = FakeTransport()
    h2 = h.restart(transport=fresh)
    assert h2.state() == "PrepareCommit"
    assert h2.coordinator.coordinator_epoch(p) == (old_epoch or 0) + 1
    await h2.flush()
    assert h2.state() == "CompleteCommit"
    markers = fresh.markers()
    assert {tp for m in markers for tp in m["tps"]} == {("t1", 0), ("t1", 1), ("t2", 0)}
    assert {(m["pid"], m["epoch"], m["commit"], m["coordinator_epoch"]) for m in markers} == {
        (pid, epoch, True, (old_epoch or 0) + 1)
    }
    assert await h2.end(pid, epoch, True) == NONE  # the client's retry finds it committed
    h2.assert_log_matches_memory()


@async_test
async def test_restart_mid_markers_resends_all_and_ignores_old_responses(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, epoch = await open_txn(h, {"t1": [0, 1]})
    h.transport.script = {("t1", 1): [NOT_LEADER]}
    await h.end(pid, epoch, False)
    await h.flush()
    assert h.state() == "PrepareAbort"
    h2 = h.restart(transport=FakeTransport())
    await h2.flush()
    assert h2.state() == "CompleteAbort"
    assert h2.coordinator.counters.transactions_aborted == 1


@async_test
async def test_unload_cancels_markers(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, epoch = await open_txn(h, {"t1": [0]})
    await h.end(pid, epoch, True)
    h.coordinator.unload_partition(h.coordinator.partition_for("tx"))
    await h.flush()
    assert h.transport.requests == []
    assert h.coordinator.markers.idle


# ---------------------------------------------------------------------- real transport


def test_view_routing() -> None:
    import uuid

    view = ClusterView(
        "c",
        1,
        topics={"t": TopicMeta("t", uuid.uuid4(), (3, NO_LEADER), (3, 4))},
    )
    r = ViewRouting(lambda: view, lambda p: 100 + p)
    assert r.leader("t", 0) == 3
    assert r.leader("t", 1) is None and r.exists("t", 1)
    assert r.leader("t", 2) is None and not r.exists("t", 2)
    assert r.leader("gone", 0) is None and not r.exists("gone", 0)
    assert r.leader("__consumer_offsets", 7) == 107


@async_test
async def test_peer_transport_sends_write_txn_markers_over_tcp() -> None:
    seen: list[Any] = []
    registry = ApiRegistry()

    async def handle(ctx: RequestContext, req: Any) -> Any:
        seen.append(req)
        return ctx.respond(
            {
                "markers": [
                    {
                        "producer_id": m.producer_id,
                        "topics": [
                            {
                                "name": t.name,
                                "partitions": [
                                    {"partition_index": p, "error_code": 0}
                                    for p in t.partition_indexes
                                ],
                            }
                            for t in m.topics
                        ],
                    }
                    for m in req.markers
                ]
            }
        )

    registry.register(27, 1, 2, handle, owner="test")  # as a broker serves it
    server = KafkaServer(registry)
    port = await server.start()
    addresses: dict[int, tuple[str, int]] = {5: ("127.0.0.1", port)}
    transport = PeerMarkerTransport(addresses.get)
    done: list[tuple[Any, Outcome]] = []

    class Routing:
        def leader(self, topic: str, partition: int) -> int | None:
            return 5 if topic == "t" else 6  # node 6 has no address

        def exists(self, topic: str, partition: int) -> bool:
            return True

        async def refresh(self) -> None:
            return None

    sender = MarkerSender(transport, Routing(), lambda s, tp, o: done.append((tp, o)))
    spec = MarkerSpec("tx", 0, 42, 3, True, 7)
    sender.enqueue(spec, {("t", 0), ("t", 1), ("u", 0)})
    try:
        await sender.flush()
        assert sorted(done) == [(("t", 0), Outcome.WRITTEN), (("t", 1), Outcome.WRITTEN)]
        assert len(seen) == 1
        m = seen[0].markers[0]
        assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (
            42,
            3,
            True,
            7,
        )
        assert sender.pending() == {("u", 0): "node 6: no address known for node 6"}
        # background loop: node 6 appears, the marker goes out without anyone flushing
        addresses[6] = ("127.0.0.1", port)
        sender.start()
        for _ in range(1000):  # bounded (10 s), normally ~50 ms
            if len(done) == 3:
                break
            await asyncio.sleep(0.01)
        assert len(done) == 3
    finally:
        await sender.stop()
        await server.stop()
