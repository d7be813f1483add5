"""Group state survives a restart of the coordinator (same data_dir)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cluster.coordinator.groups.group_support import Harness, async_test, form_group, settle
from txnchaos.cluster.coordinator.groups import GroupState

NONE = 0
REBALANCE_IN_PROGRESS = 27


@async_test
async def test_offsets_survive_restart(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    await h.commit({("t1", 0): 10, ("t2", 0): 3}, group="a", metadata="meta")
    await h.commit({("t1", 0): 11}, group="a")
    await h.commit({("t1", 1): 1}, group="b")
    h2 = await h.restart()
    assert (await h2.fetch(None, group="a"))[1] == {("t1", 0): (11, NONE), ("t2", 0): (3, NONE)}
    assert (await h2.fetch(None, group="b"))[1] == {("t1", 1): (1, NONE)}
    # simple groups are listed again after the restart
    _, listed = h2.coordinator.list_groups()
    assert {g for g, _, _ in listed} == {"a", "b"}


@async_test
async def test_without_clean_stop_state_is_still_there(tmp_path: Path) -> None:
    """Like kill -9: the first coordinator is abandoned without stop()."""
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    await h.commit({("t1", 0): 42}, generation=gen, member_id=ids[0])
    h2 = await Harness(tmp_path, h.clock).start()
    assert (await h2.fetch({"t1": [0]}))[1][("t1", 0)] == (42, NONE)
    group = h2.coordinator.group("g")
    assert group is not None and group.generation == gen


@async_test
async def test_stable_group_resumes_without_rebalance(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    h2 = await h.restart()
    group = h2.coordinator.group("g")
    assert group is not None
    assert group.state == GroupState.STABLE
    assert group.generation == gen
    assert group.leader_id == ids[0]
    assert await h2.heartbeat(ids[0], gen) == NONE
    assert await h2.heartbeat(ids[1], gen) == NONE
    assert (await h2.sync(ids[1], gen)).assignment == f"assign-{ids[1]}".encode()
    ok = await h2.commit({("t1", 0): 1}, generation=gen, member_id=ids[1])
    assert ok == {("t1", 0): NONE}
    # member sessions restart on load: a silent member expires after the session timeout
    h2.tick_after(6_000)
    assert await h2.heartbeat(ids[0], gen) == NONE
    h2.tick_after(6_000)
    assert list(group.members) == [ids[0]]


@async_test
async def test_group_persisted_mid_rebalance_rebalances_after_restart(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    ta, tb = h.start_join(ids[0]), h.start_join(ids[1])
    await settle()
    await ta, await tb  # generation gen+1 persisted, never synced
    h2 = await h.restart()
    group = h2.coordinator.group("g")
    assert group is not None
    assert group.generation == gen + 1
    assert group.state == GroupState.PREPARING_REBALANCE
    assert await h2.heartbeat(ids[0], gen + 1) == REBALANCE_IN_PROGRESS
    ta, tb = h2.start_join(ids[0]), h2.start_join(ids[1])
    await settle()
    ra, rb = await ta, await tb
    assert ra.generation_id == rb.generation_id == gen + 2


@async_test
async def test_empty_group_generation_and_deletion_persist(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 1)
    await h.leave(ids[0])
    await h.commit({("t1", 0): 9}, group="gone")
    assert h.coordinator.delete_group("gone") == NONE
    h2 = await h.restart()
    group = h2.coordinator.group("g")
    assert group is not None and group.state == GroupState.EMPTY
    assert group.generation == gen + 1
    assert h2.coordinator.group("gone") is None
    assert (await h2.fetch(None, group="gone"))[1] == {}


@async_test
async def test_pending_txn_offsets_survive_restart(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    h.coordinator.add_txn_offsets("g", 55, 1, [("t1", 0, 12, -1, "")])
    h2 = await h.restart()
    assert h2.coordinator.has_pending_txn_offsets("g", 55)
    assert h2.coordinator.complete_txn(55, commit=True) == ["g"]
    h3 = await h2.restart()
    assert (await h3.fetch({"t1": [0]}, require_stable=True))[1][("t1", 0)] == (12, NONE)


@async_test
async def test_log_is_compacted_and_replays_to_latest(tmp_path: Path) -> None:
    h = await Harness(tmp_path, compact_min_bytes=4096).start()
    for i in range(500):
        await h.commit({("t1", 0): i, ("t1", 1): 2 * i})
    path = tmp_path / f"__consumer_offsets-{h.coordinator.partition_for('g')}.log"
    assert os.path.getsize(path) < 4 * 4096
    h2 = await h.restart()
    assert (await h2.fetch(None))[1] == {("t1", 0): (499, NONE), ("t1", 1): (998, NONE)}
