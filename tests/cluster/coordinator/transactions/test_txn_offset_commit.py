"""TxnOffsetCommit with the real group coordinator, completed by transaction markers
from the real transaction coordinator (the fake transport hands offsets markers to
``apply_offsets_marker`` the way a node's WriteTxnMarkers handler does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster.coordinator.groups.group_support import FakeClock as GroupClock
from tests.cluster.coordinator.transactions.txn_support import (
    NONE,
    NOT_LEADER,
    TXN_OFFSET_COMMIT,
    FakeTransport,
    Harness,
    async_test,
)
from txnchaos.cluster.coordinator.groups import GroupConfig, GroupCoordinator
from txnchaos.cluster.coordinator.groups.txn_offset_commit_api import (
    apply_offsets_marker,
    register_txn_offset_commit,
)

UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_LOAD_IN_PROGRESS = 14
UNSTABLE_OFFSET_COMMIT = 88


class Cluster:
    """A transaction coordinator and a group coordinator (5 partitions each) whose
    offsets markers reach the group coordinator through a fake transport."""

    def __init__(self, tmp_path: Path) -> None:
        self.groups = GroupCoordinator(
            tmp_path / "groups",
            num_partitions=5,
            topic_partition_count={"t1": 3, "t2": 2}.get,
            clock=GroupClock(),
            config=GroupConfig(timer_tick_ms=0, initial_rebalance_delay_ms=0),
        )
        self.transport = FakeTransport()
        self.transport.handler = self._marker
        self.refuse: list[int] = []
        self.txn = Harness(tmp_path / "txn", transport=self.transport).start()
        register_txn_offset_commit(self.txn.registry, self.groups)

    def _marker(self, node: int, marker: Any, topic: str, partition: int) -> int:
        if topic != "__consumer_offsets":
            return NONE
        if self.refuse:
            return self.refuse.pop(0)
        result = apply_offsets_marker(
            self.groups, marker.producer_id, marker.transaction_result, [partition]
        )
        return result[partition]

    async def start(self) -> Cluster:
        await self.groups.start()
        return self

    async def txn_commit(
        self,
        pid: int,
        epoch: int,
        offsets: dict[tuple[str, int], int],
        *,
        group: str = "g",
        version: int = 3,
        generation: int = -1,
        member_id: str = "",
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append(
                {"partition_index": p, "committed_offset": off, "committed_metadata": "m"}
            )
        resp = await self.txn.call(
            TXN_OFFSET_COMMIT,
            version,
            {
                "transactional_id": "tx",
                "group_id": group,
                "producer_id": pid,
                "producer_epoch": epoch,
                "generation_id": generation,
                "member_id": member_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        return {
            (t.name, p.partition_index): int(p.error_code)
            for t in resp.topics
            for p in t.partitions
        }

    def stable_fetch(self, group: str = "g") -> dict[tuple[str, int], tuple[int, int]]:
        err, got = self.groups.fetch_offsets(group, {"t1": [0, 1]}, require_stable=True)
        assert err == NONE
        return {(t, o.partition): (o.offset, o.error) for t, offs in got.items() for o in offs}


@async_test
async def test_txn_offsets_pending_until_commit_marker(tmp_path: Path) -> None:
    c = await Cluster(tmp_path).start()
    _, pid, epoch = await c.txn.init()
    assert await c.txn.add_offsets(pid, epoch, "g") == NONE
    assert await c.txn_commit(pid, epoch, {("t1", 0): 10, ("t1", 1): 20}) == {
        ("t1", 0): NONE,
        ("t1", 1): NONE,
    }
    assert c.groups.has_pending_txn_offsets("g", pid)
    assert c.stable_fetch() == {
        ("t1", 0): (-1, UNSTABLE_OFFSET_COMMIT),
        ("t1", 1): (-1, UNSTABLE_OFFSET_COMMIT),
    }
    assert await c.txn.end(pid, epoch, True) == NONE
    await c.txn.flush()
    assert c.txn.state() == "CompleteCommit"
    assert not c.groups.has_pending_txn_offsets("g", pid)
    assert c.stable_fetch() == {("t1", 0): (10, NONE), ("t1", 1): (20, NONE)}


@async_test
async def test_txn_offsets_dropped_on_abort(tmp_path: Path) -> None:
    c = await Cluster(tmp_path).start()
    _, pid, epoch = await c.txn.init()
    await c.txn.add_offsets(pid, epoch, "g")
    await c.txn_commit(pid, epoch, {("t1", 0): 10})
    assert await c.txn.end(pid, epoch, False) == NONE
    await c.txn.flush()
    assert c.txn.state() == "CompleteAbort"
    assert c.stable_fetch() == {("t1", 0): (-1, NONE), ("t1", 1): (-1, NONE)}


@async_test
async def test_group_coordinator_loading_marker_is_retried(tmp_path: Path) -> None:
    c = await Cluster(tmp_path).start()
    _, pid, epoch = await c.txn.init()
    await c.txn.add_offsets(pid, epoch, "g")
    await c.txn_commit(pid, epoch, {("t1", 1): 5})
    c.refuse = [COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER]
    await c.txn.end(pid, epoch, True)
    await c.txn.flush()
    assert c.txn.state() == "PrepareCommit"
    for _ in range(3):
        c.txn.clock.advance(1_000)
        await c.txn.flush()
    assert c.txn.state() == "CompleteCommit"
    assert c.stable_fetch()[("t1", 1)] == (5, NONE)


@async_test
async def test_txn_offset_commit_validation(tmp_path: Path) -> None:
    c = await Cluster(tmp_path).start()
    _, pid, epoch = await c.txn.init()
    assert await c.txn_commit(pid, epoch, {("t1", 0): 1, ("nope", 0): 1}) == {
        ("t1", 0): NONE,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    # A member/generation that the (unknown) group cannot have is checked only if given.
    assert await c.txn_commit(pid, epoch, {("t1", 0): 1}, group="g2") == {("t1", 0): NONE}
    # Not coordinator for the group's partition.
    c.groups.unload_partition(c.groups.partition_for("g"))
    assert await c.txn_commit(pid, epoch, {("t1", 0): 1}) == {("t1", 0): 16}


def test_apply_offsets_marker_reports_unowned_partitions(tmp_path: Path) -> None:
    import asyncio

    async def body() -> None:
        c = await Cluster(tmp_path).start()
        p = c.groups.partition_for("g")
        c.groups.unload_partition(p)
        assert apply_offsets_marker(c.groups, 1, True, [p]) == {p: 16}
        other = (p + 1) % 5
        assert apply_offsets_marker(c.groups, 1, True, [other]) == {other: NONE}

    asyncio.run(body())


def test_group_marker_sink_matches_write_txn_markers_signature(tmp_path: Path) -> None:
    import asyncio

    from txnchaos.cluster.coordinator.groups.txn_offset_commit_api import group_marker_sink

    async def body() -> None:
        c = await Cluster(tmp_path).start()
        _, pid, epoch = await c.txn.init()
        await c.txn_commit(pid, epoch, {("t1", 0): 42})
        sink = group_marker_sink(c.groups)
        p = c.groups.partition_for("g")
        assert await sink(pid, epoch, True, [p]) == {p: NONE}
        assert c.stable_fetch()[("t1", 0)] == (42, NONE)

    asyncio.run(body())
