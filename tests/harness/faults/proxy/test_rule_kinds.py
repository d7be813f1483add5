"""Rule kinds carry their own behaviour: the link runs any kind through its hooks, in
stage order, and settles the frames a kind holds when their connection closes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar, Literal

from txnchaos.harness.faults.proxy import ProxyFleet
from txnchaos.harness.faults.proxy.link import Request
from txnchaos.harness.faults.proxy.rules import (
    FRAME_KINDS,
    LINK_KINDS,
    RULE_KINDS,
    RULE_TYPES,
    FrameRuleBase,
    LinkRuleBase,
    PolicyParts,
    RuleState,
)
from txnchaos.rundir import fault_log
from txnchaos.rundir.fault_log import read_fault_log

from .fakekafka import FakeKafka, RawClient, eventually, run

END_TXN = 26
METADATA = 3


class MarkRule(FrameRuleBase):
    """A kind the link has never heard of: logs each request it applies to and lets it go."""

    kind: Literal["mark_test"] = "mark_test"
    stage: ClassVar[int] = 25

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        request.record("mark_test", {**states[0].rule.params(), "rules": len(states)})
        return False


class SwallowRule(LinkRuleBase):
    """A link kind the link has never heard of: discards requests while active."""

    kind: Literal["swallow_test"] = "swallow_test"

    def shape_link(self, st: RuleState, link: str, parts: PolicyParts) -> None:
        parts.blackhole_request = True


def test_the_registry_names_every_kind_once() -> None:
    assert set(RULE_KINDS) == FRAME_KINDS | LINK_KINDS
    assert not FRAME_KINDS & LINK_KINDS
    assert len(RULE_KINDS) == len(RULE_TYPES)


def test_the_fault_log_format_names_the_frame_kinds() -> None:
    """The analysis counts a frame kind's fault-log lines as requests (rundir/fault_log.py)."""
    assert fault_log.FRAME_KINDS == FRAME_KINDS


def test_a_new_frame_kind_acts_through_its_own_hook(tmp_path: Path) -> None:
    async def body() -> None:
        server = await FakeKafka().start()
        fleet = await ProxyFleet(fault_log=tmp_path / "faults.jsonl", seed=3).start()
        link = await fleet.add_link("client->n1", server.address)
        client = await RawClient().connect(link.address)
        fleet.add_rule(MarkRule(id="m1", api=[END_TXN]))
        fleet.add_rule(MarkRule(id="m2", api=[END_TXN]))
        c1 = await client.send(METADATA, 12, {"topics": None})
        c2 = await client.send(END_TXN, 1, {"transactional_id": "a"})
        assert [(await client.recv())[0] for _ in range(2)] == [c1, c2]
        assert [r.correlation_id for r in server.received] == [c1, c2]
        client.close()
        await fleet.close()
        await server.close()
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "mark_test" and entry["link"] == "client->n1"
        assert entry["target"]["correlation_id"] == c2
        assert entry["params"] == {"rule": "m1", "rules": 2}  # both rules, one call

    run(body())


def test_a_new_link_kind_shapes_the_link(tmp_path: Path) -> None:
    async def body() -> None:
        server = await FakeKafka().start()
        fleet = await ProxyFleet(fault_log=tmp_path / "faults.jsonl", seed=3).start()
        link = await fleet.add_link("client->n1", server.address)
        client = await RawClient().connect(link.address)
        rule = fleet.add_rule(SwallowRule(id="s"))
        await client.send(END_TXN, 1, {"transactional_id": "a"})
        assert await client.nothing_within(0.2)
        assert server.received == []
        fleet.remove_rule(rule.id)
        c2 = await client.send(METADATA, 12, {"topics": None})
        assert (await client.recv())[0] == c2
        client.close()
        await fleet.close()
        await server.close()
        (entry,) = read_fault_log(tmp_path)  # one span, logged as the kind's name
        assert entry["kind"] == "swallow_test" and entry["params"] == {"rule": "s"}

    run(body())


def test_a_held_request_is_settled_when_its_connection_closes(tmp_path: Path) -> None:
    async def body() -> None:
        server = await FakeKafka().start()
        fleet = await ProxyFleet(fault_log=tmp_path / "faults.jsonl", seed=3).start()
        link = await fleet.add_link("client->n1", server.address)
        client = await RawClient().connect(link.address)
        rule = fleet.add_rule({"kind": "reorder", "api": "EndTxn", "max_hold_ms": 600_000})
        await client.send(END_TXN, 1, {"transactional_id": "x"})
        state = fleet.rule_state(rule.id)
        await eventually(lambda: len(state.held) == 1)
        client.close()
        await eventually(lambda: not state.held and not link.connections)
        await asyncio.sleep(0)
        assert server.received == []
        await fleet.close()
        await server.close()
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "reorder" and entry["params"]["outcome"] == "connection closed"

    run(body())
