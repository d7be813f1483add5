"""Hypothesis: random join/sync/heartbeat/leave/time sequences keep the classic
group's invariants, and the group always converges once clients go quiet."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.cluster.coordinator.groups.group_support import Harness, settle
from txnchaos.cluster.coordinator.groups import GroupState

MEMBER_ID_REQUIRED = 79
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
ILLEGAL_GENERATION = 22

PROTOCOLS = [
    [("range", b"r0"), ("roundrobin", b"rr0")],
    [("roundrobin", b"rr1"), ("range", b"r1")],
    [("range", b"r2")],
    [("cooperative-sticky", b"c3"), ("range", b"r3")],
]
INSTANCE_IDS = [None, None, None, "static-3"]


@dataclass
class Client:
    index: int
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: list[str] = field(default_factory=list)
    join_task: asyncio.Task[Any] | None = None
    sync_task: asyncio.Task[Any] | None = None
    sync_generation: int = -1


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.dir = Path(tempfile.mkdtemp(prefix="group-sm-"))
        self.h = Harness(self.dir)
        self.run(self.h.start())
        self.clients = [Client(i) for i in range(len(PROTOCOLS))]
        # generation -> (leader, protocol, members) as told to clients that joined it
        self.generations: dict[int, tuple[str, str]] = {}
        self.leader_members: dict[int, frozenset[str]] = {}
        self.assignments: dict[int, dict[str, bytes]] = {}
        self.last_generation = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    # -- helpers -------------------------------------------------------------------------

    def harvest(self) -> None:
        self.run(settle())
        for c in self.clients:
            if c.join_task is not None and c.join_task.done():
                resp = c.join_task.result()
                c.join_task = None
                self.on_join(c, resp)
            if c.sync_task is not None and c.sync_task.done():
                resp = c.sync_task.result()
                c.sync_task = None
                self.on_sync(c, resp)

    def on_join(self, c: Client, resp: Any) -> None:
        err = int(resp.error_code)
        if err == MEMBER_ID_REQUIRED:
            c.member_id = resp.member_id
        elif err == 0:
            c.member_id = resp.member_id
            c.generation = resp.generation_id
            c.leader = resp.leader
            seen = self.generations.setdefault(
                resp.generation_id, (resp.leader, resp.protocol_name)
            )
            assert seen == (resp.leader, resp.protocol_name), "one leader/protocol per generation"
            if resp.members:
                assert resp.leader == resp.member_id, "only the leader gets the member list"
                members = frozenset(m.member_id for m in resp.members)
                assert resp.member_id in members
                prior = self.leader_members.setdefault(resp.generation_id, members)
                assert prior == members
                c.members = sorted(members)
            else:
                assert resp.leader != resp.member_id or resp.skip_assignment
                c.members = []
        elif err in (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
            c.member_id = ""

    def on_sync(self, c: Client, resp: Any) -> None:
        err = int(resp.error_code)
        if err == 0:
            expected = self.assignments.get(c.sync_generation, {}).get(c.member_id, b"")
            assert resp.assignment == expected, "a member gets what its leader assigned it"
        elif err in (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
            c.member_id = ""

    def join_kwargs(self, c: Client) -> dict[str, Any]:
        return {
            "protocols": PROTOCOLS[c.index],
            "instance_id": INSTANCE_IDS[c.index],
            "session_ms": 10_000,
            "rebalance_ms": 8_000,
        }

    # -- rules ---------------------------------------------------------------------------

    @rule(i=st.integers(0, len(PROTOCOLS) - 1))
    def join(self, i: int) -> None:
        c = self.clients[i]
        if c.join_task is None:
            c.join_task = self.h.start_join(c.member_id, **self.join_kwargs(c))
        self.harvest()

    @rule(i=st.integers(0, len(PROTOCOLS) - 1))
    def sync(self, i: int) -> None:
        c = self.clients[i]
        if c.sync_task is None and c.member_id and c.generation >= 0:
            assignments = None
            if c.leader == c.member_id and c.members:
                assignments = {m: f"{c.generation}:{m}".encode() for m in c.members}
                self.assignments.setdefault(c.generation, assignments)
            c.sync_generation = c.generation
            c.sync_task = self.h.start_sync(
                c.member_id, c.generation, assignments, instance_id=INSTANCE_IDS[i]
            )
        self.harvest()

    @rule(i=st.integers(0, len(PROTOCOLS) - 1))
    def heartbeat(self, i: int) -> None:
        c = self.clients[i]
        if c.member_id:
            err = self.run(self.h.heartbeat(c.member_id, c.generation, instance_id=INSTANCE_IDS[i]))
            if err in (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
                c.member_id = ""
        self.harvest()

    @rule(i=st.integers(0, len(PROTOCOLS) - 1))
    def leave(self, i: int) -> None:
        c = self.clients[i]
        if c.member_id and INSTANCE_IDS[i] is None:
            self.run(self.h.leave(c.member_id))
            c.member_id = ""
        self.harvest()

    @rule(ms=st.sampled_from([50, 1_000, 4_000, 9_000]))
    def advance(self, ms: int) -> None:
        self.h.tick_after(ms)
        self.harvest()

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def group_invariants(self) -> None:
        group = self.h.coordinator.group("g")
        if group is None:
            return
        assert group.generation >= self.last_generation, "generations never go back"
        event(f"state {group.state.value}, generation>=3: {group.generation >= 3}")
        self.last_generation = group.generation
        members = group.members
        assert not (group.pending_members & set(members))
        for m in members.values():
            assert not (m.awaiting_join and m.awaiting_sync), "a member is in one phase"
        for instance_id, member_id in group.static_members.items():
            assert members[member_id].instance_id == instance_id
        if group.state == GroupState.EMPTY:
            assert not members
        elif members:  # (PreparingRebalance may wait for a pending member id with no members)
            assert group.leader_id in members
        if group.state == GroupState.STABLE:
            assert all(m.assignment is not None for m in members.values())
            assert not any(m.awaiting_join or m.awaiting_sync for m in members.values())
        if group.state == GroupState.PREPARING_REBALANCE:
            assert not any(m.awaiting_sync for m in members.values())
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert group.protocol_name is not None
            assert all(group.protocol_name in m.protocol_names() for m in members.values())
            assert self.generations.get(group.generation, (group.leader_id,))[0] in (
                group.leader_id,
                *[m for m in members],
            )

    def teardown(self) -> None:
        try:
            # Liveness: once clients stop talking, every parked request is answered
            # and the group drains to Empty.
            for _ in range(6):
                self.h.tick_after(11_000)
                self.run(settle())
            for c in self.clients:
                for task in (c.join_task, c.sync_task):
                    assert task is None or task.done(), "a parked request was never answered"
            group = self.h.coordinator.group("g")
            assert group is None or group.state == GroupState.EMPTY
        finally:
            for c in self.clients:
                for task in (c.join_task, c.sync_task):
                    if task is not None and not task.done():
                        task.cancel()
            self.run(self.h.coordinator.stop())
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()
            asyncio.set_event_loop(None)
            shutil.rmtree(self.dir, ignore_errors=True)


GroupMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_group_state_machine = GroupMachine.TestCase
