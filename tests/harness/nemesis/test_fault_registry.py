"""The fault registry: every kind's schedule, validation and execution come from its class."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from txnchaos.harness.faults.proxy.rules import RULE_KINDS
from txnchaos.harness.nemesis.executor import NemesisExecutor
from txnchaos.harness.nemesis.faults import FAULTS, Fault, FaultContext
from txnchaos.harness.nemesis.faults.base import FaultBase
from txnchaos.harness.nemesis.schedule import (
    NemesisConfig,
    RandomNemesis,
    ScheduledFault,
    Targets,
    TimedAction,
    build_schedule,
)
from txnchaos.harness.workload.config import load_workload


def test_every_proxy_rule_kind_is_a_fault_whose_parameters_are_its_rule() -> None:
    proxy = {name: f for name, f in FAULTS.items() if f.family == "proxy_rule"}
    assert set(proxy) == set(RULE_KINDS)
    for name, fault in proxy.items():
        assert fault.parameters is RULE_KINDS[name]
        assert fault.targets == "links" and fault.heals


def test_scenario_kinds_are_the_registry() -> None:
    for name in FAULTS:
        RandomNemesis(mix={name: 1.0}, intensity=1)
    with pytest.raises(ValidationError, match="Input should be 'delay'"):
        RandomNemesis(mix={"meteor": 1.0}, intensity=1)
    with pytest.raises(ValidationError, match="kind"):
        TimedAction(at=1, kind="meteor", duration=1)  # type: ignore[arg-type]


def test_an_action_rule_is_checked_against_its_kinds_parameters() -> None:
    TimedAction(at=1, kind="delay", duration=2, rule={"link": "client->*", "ms": 5})
    with pytest.raises(ValidationError, match=r"`rule` of a delay action: ms: Field required"):
        TimedAction(at=1, kind="delay", duration=2, rule={"link": "client->*"})
    with pytest.raises(ValidationError, match=r"`rule` of a throttle action: bytes_per_second"):
        TimedAction(at=1, kind="throttle", duration=2, rule={"bytes_per_second": 0})
    with pytest.raises(ValidationError, match="direction must be 'request'"):
        TimedAction(at=1, kind="reorder", duration=2, rule={"direction": "response"})


def test_random_faults_only_pick_kinds_that_can_hit_the_cluster() -> None:
    gen = RandomNemesis(mix={"kill": 5, "delay": 1, "crash_consumer": 1}, intensity=60)
    links_only = Targets(nodes=[1], links=["client->1"], clients=[], node_faults=False)
    schedule = build_schedule(NemesisConfig(random=gen), seed=3, duration=120, targets=links_only)
    assert schedule and {f.kind for f in schedule} == {"delay"}
    assert all(f.rule["link"] == "client->1" for f in schedule)


class RecordingFault(FaultBase):
    """A kind that only records what the executor asks of it."""

    name = "delay"
    family = "proxy_rule"
    targets = "links"
    heals = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.applied = threading.Event()

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        context.activate(index, fault, 0.0, f"undo-{index}", "recording")
        self.calls.append(("apply", index))
        self.applied.set()

    def heal(self, context: FaultContext, undo: Any) -> None:
        self.calls.append(("heal", undo))


def test_the_executor_applies_and_heals_through_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recording = RecordingFault()
    as_protocol: Fault = recording
    monkeypatch.setitem(FAULTS, "delay", as_protocol)
    workload = load_workload({"topics": [{"name": "t"}], "users": []})
    handle: Any = SimpleNamespace(bootstrap="127.0.0.1:1", fleet=None)
    fault = ScheduledFault(at=0.0, kind="delay", duration=600.0, rule={"link": "x"})
    executor = NemesisExecutor([fault], handle, workload=workload, run_dir=tmp_path, seed=1)
    executor.start()
    assert recording.applied.wait(30)
    (active,) = executor.active()
    assert active.undo == "undo-0" and active.description == "recording"
    executor.heal()
    assert recording.calls == [("apply", 0), ("heal", "undo-0")]
    assert (executor.stats.applied, executor.stats.healed, executor.stats.errors) == (1, 1, [])
    assert executor.active() == []
