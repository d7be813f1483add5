"""OffsetCommit / OffsetFetch and pending transactional offsets."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.coordinator.groups.group_support import (
    OFFSET_FETCH,
    Harness,
    async_test,
    form_group,
    settle,
)

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
GROUP_ID_NOT_FOUND = 69
UNSTABLE_OFFSET_COMMIT = 88


@async_test
async def test_simple_commit_and_fetch(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    errors = await h.commit({("t1", 0): 10, ("t1", 2): 30, ("t2", 0): 7}, metadata="m")
    assert set(errors.values()) == {NONE}
    err, got = await h.fetch({"t1": [0, 1, 2]})
    assert err == NONE
    assert got == {("t1", 0): (10, NONE), ("t1", 1): (-1, NONE), ("t1", 2): (30, NONE)}
    err, everything = await h.fetch(None)
    assert everything == {("t1", 0): (10, NONE), ("t1", 2): (30, NONE), ("t2", 0): (7, NONE)}
    assert (await h.fetch({"t1": [0]}, group="other"))[1] == {("t1", 0): (-1, NONE)}
    # newer commit replaces
    await h.commit({("t1", 0): 11})
    assert (await h.fetch({"t1": [0]}))[1][("t1", 0)] == (11, NONE)


@async_test
async def test_fetch_returns_leader_epoch_and_metadata(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    await h.commit({("t1", 1): 5}, metadata="hello")
    resp = await h.call(
        OFFSET_FETCH, 7, {"group_id": "g", "topics": [{"name": "t1", "partition_indexes": [1]}]}
    )
    p = resp.topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (5, 4, "hello")


@async_test
async def test_commit_rejects_unknown_partitions_and_large_metadata(tmp_path: Path) -> None:
    h = await Harness(tmp_path, offset_metadata_max_bytes=8).start()
    errors = await h.commit({("t1", 0): 1, ("t1", 3): 1, ("nope", 0): 1}, metadata="ok")
    assert errors == {
        ("t1", 0): NONE,
        ("t1", 3): UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    errors = await h.commit({("t1", 1): 1}, metadata="x" * 9)
    assert errors == {("t1", 1): OFFSET_METADATA_TOO_LARGE}
    assert (await h.fetch({"t1": [1]}))[1][("t1", 1)] == (-1, NONE)


@async_test
async def test_group_managed_commit_validation(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    # generation given for a group that does not exist
    assert await h.commit({("t1", 0): 1}, group="x", generation=3, member_id="m") == {
        ("t1", 0): GROUP_ID_NOT_FOUND
    }
    assert await h.commit({("t1", 0): 1}, group="x", generation=3, member_id="m", version=8) == {
        ("t1", 0): ILLEGAL_GENERATION
    }
    ids, gen = await form_group(h, 2)
    ok = await h.commit({("t1", 0): 5}, generation=gen, member_id=ids[1])
    assert ok == {("t1", 0): NONE}
    stale = await h.commit({("t1", 0): 6}, generation=gen - 1, member_id=ids[1])
    assert stale == {("t1", 0): ILLEGAL_GENERATION}
    assert await h.commit({("t1", 0): 6}, generation=gen, member_id="ghost") == {
        ("t1", 0): UNKNOWN_MEMBER_ID
    }
    # simple commits are refused while the group has members
    assert await h.commit({("t1", 0): 6}) == {("t1", 0): UNKNOWN_MEMBER_ID}
    # during CompletingRebalance a member of the new generation must wait
    ta, tb = h.start_join(ids[0]), h.start_join(ids[1])
    await settle()
    await ta, await tb
    assert await h.commit({("t1", 0): 6}, generation=gen + 1, member_id=ids[1]) == {
        ("t1", 0): REBALANCE_IN_PROGRESS
    }
    assert (await h.fetch({"t1": [0]}))[1][("t1", 0)] == (5, NONE)


@async_test
async def test_commit_v2_and_fetch_v1(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    assert await h.commit({("t1", 0): 3}, version=2) == {("t1", 0): NONE}
    _err, got = await h.fetch({"t1": [0]}, version=1)
    assert got == {("t1", 0): (3, NONE)}


@async_test
async def test_fetch_v8_multi_group(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    await h.commit({("t1", 0): 1}, group="a")
    await h.commit({("t2", 0): 2}, group="b")
    resp = await h.call(
        OFFSET_FETCH,
        9,
        {
            "groups": [
                {"group_id": "a", "topics": None},
                {"group_id": "b", "topics": [{"name": "t2", "partition_indexes": [0]}]},
                {"group_id": "c", "topics": None},
            ],
            "require_stable": True,
        },
    )
    got = {
        g.group_id: {
            (t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions
        }
        for g in resp.groups
    }
    assert got == {"a": {("t1", 0): 1}, "b": {("t2", 0): 2}, "c": {}}


@async_test
async def test_pending_transactional_offsets(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    c = h.coordinator
    await h.commit({("t1", 0): 5, ("t1", 1): 5})
    assert c.validate_offset_commit("g", -1, "", None, transactional=True) == NONE
    errors = c.add_txn_offsets("g", 1000, 0, [("t1", 0, 50, -1, ""), ("t1", 2, 70, -1, None)])
    assert errors == {("t1", 0): NONE, ("t1", 2): NONE}
    assert c.has_pending_txn_offsets("g") and c.has_pending_txn_offsets("g", 1000)

    assert (await h.fetch({"t1": [0, 1]}))[1] == {("t1", 0): (5, NONE), ("t1", 1): (5, NONE)}
    _, stable = await h.fetch({"t1": [0, 1]}, require_stable=True)
    assert stable == {("t1", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t1", 1): (5, NONE)}
    _, all_stable = await h.fetch(None, require_stable=True)
    assert all_stable[("t1", 2)] == (-1, UNSTABLE_OFFSET_COMMIT)

    assert c.complete_txn(1000, commit=True) == ["g"]
    assert not c.has_pending_txn_offsets("g")
    _, after = await h.fetch(None, require_stable=True)
    assert after == {("t1", 0): (50, NONE), ("t1", 1): (5, NONE), ("t1", 2): (70, NONE)}

    c.add_txn_offsets("g", 2000, 3, [("t1", 1, 99, -1, "")])
    assert c.complete_txn(2000, commit=False) == ["g"]
    assert (await h.fetch({"t1": [1]}, require_stable=True))[1][("t1", 1)] == (5, NONE)
    assert c.complete_txn(2000, commit=True) == []


@async_test
async def test_plain_commit_after_txn_commit_wins(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    c = h.coordinator
    c.add_txn_offsets("g", 7, 0, [("t1", 0, 100, -1, "")])
    await h.commit({("t1", 0): 200})
    c.complete_txn(7, commit=True)
    assert (await h.fetch({"t1": [0]}))[1][("t1", 0)] == (200, NONE)


@async_test
async def test_txn_offsets_reject_unknown_partitions(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    errors = h.coordinator.add_txn_offsets("g", 1, 0, [("zzz", 0, 1, -1, "")])
    assert errors == {("zzz", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert not h.coordinator.has_pending_txn_offsets("g")
