"""The classic rebalance protocol, driven through the real JoinGroup/SyncGroup/
Heartbeat/LeaveGroup handlers (no network, fake clock)."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.coordinator.groups.group_support import (
    DELETE,
    DESCRIBE,
    JOIN,
    LEAVE,
    LIST,
    Harness,
    async_test,
    form_group,
    settle,
)
from txnchaos.cluster.coordinator.groups import GroupState

NONE = 0
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
INCONSISTENT_GROUP_PROTOCOL = 23
FENCED_INSTANCE_ID = 82
INVALID_SESSION_TIMEOUT = 26
NOT_COORDINATOR = 16


@async_test
async def test_single_member_join_sync_heartbeat(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    first = await h.join("")
    assert first.error_code == MEMBER_ID_REQUIRED
    member_id = first.member_id
    assert member_id.startswith("c-")

    resp = await h.join(member_id)
    assert resp.error_code == NONE
    assert resp.generation_id == 1
    assert resp.leader == member_id
    assert resp.member_id == member_id
    assert resp.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in resp.members] == [
        (member_id, b"meta-" + member_id.encode())
    ]
    group = h.coordinator.group("g")
    assert group is not None and group.state == GroupState.COMPLETING_REBALANCE

    sync = await h.sync(member_id, 1, {member_id: b"A"})
    assert sync.error_code == NONE and sync.assignment == b"A"
    assert group.state == GroupState.STABLE
    assert await h.heartbeat(member_id, 1) == NONE
    await h.coordinator.stop()


@async_test
async def test_join_v0_needs_no_member_id_round_trip(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    resp = await h.join("", version=0)
    assert resp.error_code == NONE and resp.generation_id == 1
    assert resp.leader == resp.member_id


@async_test
async def test_join_v9_reports_protocol_type(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    member_id = await h.new_member_id()
    resp = await h.join(member_id, version=9)
    assert resp.protocol_type == "consumer" and resp.skip_assignment is False


@async_test
async def test_two_members_leader_gets_metadata_and_followers_wait_for_assignment(
    tmp_path: Path,
) -> None:
    h = await Harness(tmp_path).start()
    a = await h.new_member_id()
    ra = await h.join(a)
    assert ra.generation_id == 1
    assert (await h.sync(a, 1, {a: b"all"})).assignment == b"all"

    b = await h.new_member_id()
    tb = h.start_join(b)
    await settle()
    assert not tb.done()
    group = h.coordinator.group("g")
    assert group is not None and group.state == GroupState.PREPARING_REBALANCE
    assert await h.heartbeat(a, 1) == REBALANCE_IN_PROGRESS

    ra2 = await h.join(a)
    rb = await tb
    assert ra2.generation_id == rb.generation_id == 2
    assert ra2.leader == rb.leader == a
    assert sorted(m.member_id for m in ra2.members) == sorted([a, b])
    assert rb.members == ()

    follower_sync = h.start_sync(b, 2)
    await settle()
    assert not follower_sync.done(), "a follower's SyncGroup waits for the leader's"
    leader_sync = await h.sync(a, 2, {a: b"p0", b: b"p1"})
    assert leader_sync.assignment == b"p0"
    assert (await follower_sync).assignment == b"p1"
    assert group.state == GroupState.STABLE
    assert h.coordinator.rebalances_completed == 2


@async_test
async def test_member_missing_from_leader_assignment_gets_empty_bytes(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    t0 = h.start_join(ids[0])  # leader rejoins -> rebalance
    t1 = h.start_join(ids[1])
    await settle()
    await t0, await t1
    f = h.start_sync(ids[1], gen + 1)
    await h.sync(ids[0], gen + 1, {ids[0]: b"x"})
    assert (await f).assignment == b""


@async_test
async def test_protocol_selection_and_inconsistent_protocols(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    a = await h.new_member_id()
    b = await h.new_member_id()
    ta = h.start_join(a, protocols=[("range", b"r"), ("roundrobin", b"rr")])
    tb = h.start_join(b, protocols=[("roundrobin", b"rr"), ("range", b"r")])
    await settle()
    ra, rb = await ta, await tb
    # One vote each: the tie goes to the earliest member's preference.
    assert ra.protocol_name == rb.protocol_name == "range"

    c = await h.new_member_id()
    bad = await h.join(c, protocols=[("sticky", b"")])
    assert bad.error_code == INCONSISTENT_GROUP_PROTOCOL
    other_type = await h.join("", protocol_type="connect")
    assert other_type.error_code == INCONSISTENT_GROUP_PROTOCOL

    tc = h.start_join(c, protocols=[("roundrobin", b"rr")])
    ta = h.start_join(a, protocols=[("range", b"r"), ("roundrobin", b"rr")])
    tb = h.start_join(b, protocols=[("roundrobin", b"rr"), ("range", b"r")])
    await settle()
    results = [await t for t in (ta, tb, tc)]
    assert {r.protocol_name for r in results} == {"roundrobin"}


@async_test
async def test_heartbeat_errors(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    assert await h.heartbeat("nobody", 1, group="unknown") == UNKNOWN_MEMBER_ID
    ids, gen = await form_group(h, 1)
    assert await h.heartbeat("nobody", gen) == UNKNOWN_MEMBER_ID
    assert await h.heartbeat(ids[0], gen + 5) == ILLEGAL_GENERATION
    assert await h.heartbeat(ids[0], gen) == NONE


@async_test
async def test_invalid_session_timeout(tmp_path: Path) -> None:
    h = await Harness(tmp_path, min_session_timeout_ms=6000).start()
    resp = await h.join("", session_ms=10)
    assert resp.error_code == INVALID_SESSION_TIMEOUT


@async_test
async def test_unknown_member_join_and_sync_errors(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    assert (await h.join("ghost")).error_code == UNKNOWN_MEMBER_ID
    ids, gen = await form_group(h, 2)
    assert (await h.join("ghost")).error_code == UNKNOWN_MEMBER_ID
    assert (await h.sync(ids[0], gen + 1)).error_code == ILLEGAL_GENERATION
    assert (await h.sync("ghost", gen)).error_code == UNKNOWN_MEMBER_ID
    # A stable follower asking again gets its assignment back.
    assert (await h.sync(ids[1], gen)).assignment == f"assign-{ids[1]}".encode()

    leader_rejoin = h.start_join(ids[0])
    await settle()
    assert (await h.sync(ids[1], gen)).error_code == REBALANCE_IN_PROGRESS
    leader_rejoin.cancel()


@async_test
async def test_follower_rejoin_with_same_protocols_in_stable_group_keeps_generation(
    tmp_path: Path,
) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    again = await h.join(ids[1])
    assert again.error_code == NONE and again.generation_id == gen and again.members == ()
    group = h.coordinator.group("g")
    assert group is not None and group.state == GroupState.STABLE


@async_test
async def test_leave_triggers_rebalance(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    assert await h.leave(ids[1]) == NONE
    group = h.coordinator.group("g")
    assert group is not None and group.state == GroupState.PREPARING_REBALANCE
    assert await h.heartbeat(ids[0], gen) == REBALANCE_IN_PROGRESS
    resp = await h.join(ids[0])
    assert resp.generation_id == gen + 1 and [m.member_id for m in resp.members] == [ids[0]]
    assert await h.leave(ids[1]) == UNKNOWN_MEMBER_ID


@async_test
async def test_leave_batch_v3_reports_per_member(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, _gen = await form_group(h, 3)
    resp = await h.call(
        LEAVE,
        5,
        {
            "group_id": "g",
            "members": [
                {"member_id": ids[1]},
                {"member_id": "ghost"},
                {"member_id": ids[2], "reason": "shutdown"},
            ],
        },
    )
    assert resp.error_code == NONE
    assert [int(m.error_code) for m in resp.members] == [NONE, UNKNOWN_MEMBER_ID, NONE]
    group = h.coordinator.group("g")
    assert group is not None and list(group.members) == [ids[0]]
    unknown_group = await h.call(LEAVE, 3, {"group_id": "nope", "members": [{"member_id": "x"}]})
    assert unknown_group.error_code == NONE
    assert [int(m.error_code) for m in unknown_group.members] == [UNKNOWN_MEMBER_ID]


@async_test
async def test_last_member_leaving_empties_group_with_new_generation(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 1)
    assert await h.leave(ids[0]) == NONE
    group = h.coordinator.group("g")
    assert group is not None and group.state == GroupState.EMPTY
    assert group.generation == gen + 1 and group.leader_id is None


@async_test
async def test_leaving_during_join_phase_completes_it(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    ta = h.start_join(ids[0])
    await settle()
    assert not ta.done()
    assert await h.leave(ids[1]) == NONE
    resp = await ta
    assert resp.generation_id == gen + 1 and [m.member_id for m in resp.members] == [ids[0]]


@async_test
async def test_session_timeout_removes_silent_member(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    h.tick_after(6000)
    assert await h.heartbeat(ids[0], gen) == NONE
    h.tick_after(6000)  # ids[1] silent for 12 s > 10 s session timeout
    group = h.coordinator.group("g")
    assert group is not None and list(group.members) == [ids[0]]
    assert group.state == GroupState.PREPARING_REBALANCE
    assert await h.heartbeat(ids[0], gen) == REBALANCE_IN_PROGRESS
    assert await h.heartbeat(ids[1], gen) == UNKNOWN_MEMBER_ID
    resp = await h.join(ids[0])
    assert resp.generation_id == gen + 1


@async_test
async def test_member_parked_in_join_is_not_expired_by_session_timeout(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    ta = h.start_join(ids[0], rebalance_ms=60_000)
    await settle()
    h.tick_after(11_000)  # ids[0] waits in JoinGroup: alive; ids[1] silent: expired
    resp = await ta
    assert resp.generation_id == gen + 1
    assert [m.member_id for m in resp.members] == [ids[0]]


@async_test
async def test_rebalance_timeout_drops_members_that_do_not_rejoin(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2, session_ms=30_000, rebalance_ms=5_000)
    ta = h.start_join(ids[0], session_ms=30_000, rebalance_ms=5_000)
    await settle()
    assert await h.heartbeat(ids[1], gen) == REBALANCE_IN_PROGRESS
    h.tick_after(4_000)
    assert not ta.done()
    h.tick_after(1_500)
    await settle()
    resp = await ta
    assert resp.generation_id == gen + 1
    assert [m.member_id for m in resp.members] == [ids[0]]
    assert await h.heartbeat(ids[1], gen) == UNKNOWN_MEMBER_ID


@async_test
async def test_pending_sync_timeout_removes_member_that_never_syncs(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    ta = h.start_join(ids[0], rebalance_ms=5_000)
    tb = h.start_join(ids[1], rebalance_ms=5_000)
    await settle()
    await ta, await tb
    assert (await h.sync(ids[0], gen + 1, {ids[0]: b"a", ids[1]: b"b"})).assignment == b"a"
    # ids[1] heartbeats but never sends SyncGroup.
    h.tick_after(3_000)
    assert await h.heartbeat(ids[1], gen + 1) == NONE
    h.tick_after(3_000)
    group = h.coordinator.group("g")
    assert group is not None and list(group.members) == [ids[0]]
    assert group.state == GroupState.PREPARING_REBALANCE


@async_test
async def test_pending_member_id_expires(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    a = await h.new_member_id()
    await h.new_member_id(session_ms=1_000)  # never comes back
    ta = h.start_join(a)
    await settle()
    assert not ta.done(), "the join phase waits for a member id it handed out"
    h.tick_after(1_500)
    await settle()
    assert (await ta).generation_id == 1


@async_test
async def test_leader_leaving_during_sync_phase_fails_followers_sync(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, gen = await form_group(h, 2)
    ta, tb = h.start_join(ids[0]), h.start_join(ids[1])
    await settle()
    await ta, await tb
    follower = h.start_sync(ids[1], gen + 1)
    await settle()
    assert await h.leave(ids[0]) == NONE
    assert (await follower).error_code == REBALANCE_IN_PROGRESS


@async_test
async def test_initial_rebalance_delay_gathers_members(tmp_path: Path) -> None:
    h = await Harness(tmp_path, initial_rebalance_delay_ms=300).start()
    a = await h.new_member_id()
    ta = h.start_join(a)
    await settle()
    h.tick_after(200)
    b = await h.new_member_id()
    tb = h.start_join(b)
    await settle()
    h.tick_after(150)  # first delay over, but b arrived meanwhile: extended
    await settle()
    assert not ta.done() and not tb.done()
    h.tick_after(300)
    await settle()
    ra, rb = await ta, await tb
    assert ra.generation_id == rb.generation_id == 1
    assert len(ra.members) == 2


@async_test
async def test_static_member_rejoin_takes_over_without_rebalance(tmp_path: Path) -> None:
    h = await Harness(tmp_path, initial_rebalance_delay_ms=100).start()
    ta = h.start_join("", instance_id="i-a")
    tb = h.start_join("", instance_id="i-b")
    await settle()
    h.tick_after(100)  # b arrived during the delay: extended once
    h.tick_after(100)
    await settle()
    ra, rb = await ta, await tb
    assert ra.error_code == rb.error_code == NONE, "static members skip MEMBER_ID_REQUIRED"
    leader = ra.leader
    follower = rb if ra.member_id == leader else ra
    follower_instance = "i-b" if follower is rb else "i-a"
    leader_instance = "i-a" if follower is rb else "i-b"
    gen = ra.generation_id
    fs = h.start_sync(follower.member_id, gen, instance_id=follower_instance)
    await h.sync(leader, gen, {leader: b"L", follower.member_id: b"F"}, instance_id=leader_instance)
    assert (await fs).assignment == b"F"

    # The follower restarts: same instance id, no member id.
    again = await h.join("", instance_id=follower_instance)
    assert again.error_code == NONE
    assert again.generation_id == gen
    assert again.member_id != follower.member_id
    sync = await h.sync(again.member_id, gen, instance_id=follower_instance)
    assert sync.assignment == b"F"
    old = await h.heartbeat(follower.member_id, gen, instance_id=follower_instance)
    assert old == FENCED_INSTANCE_ID
    assert await h.heartbeat(again.member_id, gen, instance_id=follower_instance) == NONE
    group = h.coordinator.group("g")
    assert group is not None and group.state == GroupState.STABLE


@async_test
async def test_static_member_not_expired_by_join_phase(tmp_path: Path) -> None:
    h = await Harness(tmp_path, initial_rebalance_delay_ms=100).start()
    ta = h.start_join("", instance_id="i-a", rebalance_ms=5_000, session_ms=60_000)
    tb = h.start_join("", instance_id="i-b", rebalance_ms=5_000, session_ms=60_000)
    await settle()
    h.tick_after(100)  # b arrived during the delay: extended once
    h.tick_after(100)
    await settle()
    ra, rb = await ta, await tb
    gen = ra.generation_id
    # a third static member joins; i-b never rejoins but keeps its place
    tc = h.start_join("", instance_id="i-c", rebalance_ms=5_000)
    ta = h.start_join(ra.member_id, instance_id="i-a", rebalance_ms=5_000)
    await settle()
    h.tick_after(6_000)
    await settle()
    rc, ra2 = await tc, await ta
    assert rc.generation_id == ra2.generation_id == gen + 1
    group = h.coordinator.group("g")
    assert group is not None and rb.member_id in group.members


@async_test
async def test_describe_list_delete(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, _gen = await form_group(h, 2)
    await h.commit({("t1", 0): 5}, group="simple")
    listed = await h.call(LIST, 4, {"states_filter": []})
    assert {(g.group_id, g.protocol_type, g.group_state) for g in listed.groups} == {
        ("g", "consumer", "Stable"),
        ("simple", "", "Empty"),
    }
    stable_only = await h.call(LIST, 4, {"states_filter": ["stable"]})
    assert [g.group_id for g in stable_only.groups] == ["g"]
    assert len((await h.call(LIST, 0, {})).groups) == 2

    described = await h.call(
        DESCRIBE, 5, {"groups": ["g", "nope"], "include_authorized_operations": True}
    )
    g, nope = described.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert {m.member_id: m.member_assignment for m in g.members} == {
        mid: f"assign-{mid}".encode() for mid in ids
    }
    assert all(m.client_host == "/127.0.0.1" for m in g.members)
    assert nope.group_state == "Dead" and nope.error_code == NONE

    deleted = await h.call(DELETE, 2, {"groups_names": ["g", "simple", "nope"]})
    assert [(r.group_id, int(r.error_code)) for r in deleted.results] == [
        ("g", 68),
        ("simple", NONE),
        ("nope", 69),
    ]
    assert h.coordinator.group("simple") is None
    assert (await h.fetch({"t1": [0]}, group="simple"))[1][("t1", 0)] == (-1, NONE)


@async_test
async def test_not_coordinator_for_unloaded_partition(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    await h.coordinator.start(partitions=[])
    assert not h.coordinator.owns("g")
    resp = await h.join("")
    assert resp.error_code == NOT_COORDINATOR
    assert await h.heartbeat("m", 1) == NOT_COORDINATOR
    err, _ = await h.fetch({"t1": [0]})
    assert err == NOT_COORDINATOR


@async_test
async def test_unload_answers_parked_joins_with_not_coordinator(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ids, _gen = await form_group(h, 2)
    ta = h.start_join(ids[0])
    await settle()
    h.coordinator.unload_partition(h.coordinator.partition_for("g"))
    assert (await ta).error_code == NOT_COORDINATOR
    assert not h.coordinator.owns("g")


@async_test
async def test_registered_versions(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    ranges = {s.api_key: (s.min_version, s.max_version) for s in h.registry.specs()}
    assert ranges == {
        8: (2, 9),
        9: (1, 9),
        11: (0, 9),
        12: (0, 4),
        13: (0, 5),
        14: (0, 5),
        15: (0, 5),
        16: (0, 4),
        42: (0, 2),
    }
    assert JOIN in ranges
