"""Rule models: validation, YAML round trip, matching, nth/probability, windows."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from txnchaos.harness.faults.proxy.apis import Targets
from txnchaos.harness.faults.proxy.rules import (
    DelayRule,
    RuleState,
    Window,
    compute_policy,
    dump_rule,
    parse_rule,
    parse_rules,
    rule_rng,
)

SCENARIO = """
- kind: delay
  link: "client->*"
  api: [Produce, end_txn, 26, "22"]
  transactional_id: "txn-*"
  ms: 200
  jitter: uniform
  jitter_ms: 50
  window: {start: 10, end: 40}
- {kind: drop_request, api: FindCoordinator, nth: 3}
- {kind: drop_response, producer_id: 7, probability: 0.5, seed: 3}
- {kind: reorder, link: [a, "b*"], max_hold_ms: 250}
- {kind: duplicate, api: Produce, copies: 2}
- {kind: blackhole, link: "n1->n2", direction: request}
- {kind: reset, window: {start: 1.0e9, end: 2.0e9, clock: absolute}}
- {kind: throttle, bytes_per_second: 1000000}
"""


def test_yaml_round_trip() -> None:
    rules = parse_rules(yaml.safe_load(SCENARIO))
    assert [r.kind for r in rules] == [
        "delay", "drop_request", "drop_response", "reorder", "duplicate",
        "blackhole", "reset", "throttle",
    ]  # fmt: skip
    assert rules[0].api == [0, 26, 26, 22]
    dumped = [dump_rule(r) for r in rules]
    assert dumped[0]["api"] == ["Produce", "EndTxn", "EndTxn", "InitProducerId"]
    again = parse_rules(yaml.safe_load(yaml.safe_dump(dumped)))
    assert again == rules


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "delay"},  # ms missing
        {"kind": "delay", "ms": -1},
        {"kind": "delay", "ms": 1, "api": "NoSuchApi"},
        {"kind": "delay", "ms": 1, "nth": 0},
        {"kind": "delay", "ms": 1, "bogus": 1},
        {"kind": "drop_request", "direction": "response"},
        {"kind": "throttle", "bytes_per_second": 0},
        {"kind": "blackhole", "api": "Produce"},  # link rules take no frame filters
        {"kind": "delay", "ms": 1, "window": {"start": 5, "end": 1}},
        {"kind": "explode"},
        {"kind": "reorder", "link": []},
    ],
)
def test_invalid_rules(bad: dict) -> None:
    with pytest.raises(ValidationError):
        parse_rule(bad)


def test_matching_and_nth() -> None:
    rule = parse_rule({"kind": "drop_request", "api": "EndTxn", "transactional_id": "a*", "nth": 2})
    st = RuleState(rule, 0.0, rule_rng(rule, 1))
    tg = Targets(("abc",), (5,))
    other = Targets(("zzz",), (5,))
    assert not st.decide(0, lambda: tg, 1.0)  # wrong api
    assert not st.decide(26, lambda: other, 1.0)  # wrong txn id
    assert not st.decide(26, lambda: tg, 1.0)  # 1st match
    assert st.decide(26, lambda: tg, 1.0)  # 2nd: applies
    assert not st.decide(26, lambda: tg, 1.0)
    assert st.matches == 3 and st.applied == 1


def test_targets_are_computed_only_when_needed() -> None:
    rule = parse_rule({"kind": "delay", "ms": 1, "api": "Produce"})
    st = RuleState(rule, 0.0, rule_rng(rule, 1))

    def boom() -> Targets:
        raise AssertionError("decoded a body needlessly")

    assert st.decide(0, boom, 1.0)


def test_probability_is_seeded() -> None:
    rule = DelayRule(id="r", ms=1, probability=0.5)

    def pattern(seed: int) -> list[bool]:
        st = RuleState(rule, 0.0, rule_rng(rule, seed))
        return [st.decide(0, lambda: Targets(), 1.0) for _ in range(64)]

    assert pattern(1) == pattern(1)
    assert pattern(1) != pattern(2)
    assert 10 < sum(pattern(1)) < 54


def test_windows() -> None:
    w = Window(start=10, end=20)
    assert w.bounds(1000.0) == (1010.0, 1020.0)
    assert Window(start=5, clock="absolute").bounds(1000.0) == (5.0, float("inf"))
    rule = parse_rule({"kind": "blackhole", "window": {"start": 10, "end": 20}})
    st = RuleState(rule, 1000.0, rule_rng(rule, 0))
    assert not compute_policy([st], "x", 1005.0).blackhole_request
    assert compute_policy([st], "x", 1015.0).blackhole_request
    assert not compute_policy([st], "x", 1020.0).blackhole_request


def test_policy_link_globs_and_directions() -> None:
    rules = parse_rules(
        [
            {"kind": "blackhole", "link": "n1->*", "direction": "response"},
            {"kind": "delay", "link": ["client->n1", "client->n3"], "ms": 1},
            {"kind": "delay", "link": "client->n2", "ms": 1, "direction": "response"},
        ]
    )
    states = [RuleState(r, 0.0, rule_rng(r, 0)) for r in rules]
    p = compute_policy(states, "n1->n2", 1.0)
    assert p.blackhole_response and not p.blackhole_request and not p.inspect_requests
    assert compute_policy(states, "client->n3", 1.0).request_rules == (states[1],)
    p2 = compute_policy(states, "client->n2", 1.0)
    assert p2.response_rules == (states[2],) and p2.request_rules == ()
    assert p2.inspect_requests  # to know the api of each response
    assert compute_policy(states, "client->n4", 1.0).request_rules == ()
