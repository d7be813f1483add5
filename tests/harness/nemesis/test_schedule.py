"""The nemesis schedule: validation, determinism, healing before the final phase."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from txnchaos.harness.nemesis.schedule import (
    NODE_SETTLE_S,
    NemesisConfig,
    RandomNemesis,
    ScheduleError,
    Targets,
    TimedAction,
    build_schedule,
    no_room,
)

TARGETS = Targets(
    nodes=[1, 2, 1001],
    links=["client->1", "client->2", "2->1001"],
    clients=["txn-producer-0", "consumer-0"],
)


def random_config(**extra: object) -> NemesisConfig:
    gen = {
        "mix": {"delay": 3, "kill": 1, "pause": 1, "drop_request": 1, "crash_producer": 1},
        "intensity": 30,
        **extra,
    }
    return NemesisConfig(random=RandomNemesis(**gen))


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    a = build_schedule(random_config(), seed=7, duration=120, targets=TARGETS)
    b = build_schedule(random_config(), seed=7, duration=120, targets=TARGETS)
    c = build_schedule(random_config(), seed=8, duration=120, targets=TARGETS)
    assert [f.model_dump() for f in a] == [f.model_dump() for f in b]
    assert [f.model_dump() for f in a] != [f.model_dump() for f in c]
    assert len(a) > 10


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    duration=st.floats(5, 300),
    calm_every=st.one_of(st.none(), st.floats(10, 60)),
)
def test_every_fault_heals_before_the_end_and_calm_is_calm(
    seed: int, duration: float, calm_every: float | None
) -> None:
    extra: dict[str, object] = {}
    if calm_every is not None:
        extra = {"calm_every": calm_every, "calm_for": calm_every / 2}
    schedule = build_schedule(random_config(**extra), seed=seed, duration=duration, targets=TARGETS)
    for fault in schedule:
        assert fault.at >= 0 and fault.end <= duration
        if calm_every is not None:
            assert fault.at % calm_every < calm_every / 2
        if fault.kind in ("kill", "pause"):
            assert fault.node in TARGETS.nodes and fault.duration > 0
        if fault.kind == "delay":
            assert fault.rule["link"] in TARGETS.links and fault.rule["ms"] > 0
    assert [f.at for f in schedule] == sorted(f.at for f in schedule)
    # Node faults one at a time: a restart must not wait on a paused controller.
    on_nodes = [f for f in schedule if f.kind in ("kill", "pause", "restart")]
    for earlier, later in pairwise(on_nodes):
        assert later.at >= earlier.end


def test_explicit_actions_are_checked() -> None:
    with pytest.raises(ValidationError, match="needs `node`"):
        TimedAction(at=1, kind="kill", duration=2)
    with pytest.raises(ValidationError, match="positive `duration`"):
        TimedAction(at=1, kind="pause", node=1)
    with pytest.raises(ValidationError, match="must not set `kind` or `window`"):
        TimedAction(at=1, kind="delay", duration=2, rule={"window": {"start": 1}})
    with pytest.raises(ScheduleError, match="no node 9"):
        build_schedule(
            NemesisConfig(actions=[TimedAction(at=1, kind="kill", node=9, duration=1)]),
            seed=1,
            duration=10,
            targets=TARGETS,
        )
    with pytest.raises(ScheduleError, match="heal before the final phase"):
        build_schedule(
            NemesisConfig(actions=[TimedAction(at=8, kind="pause", node=1, duration=5)]),
            seed=1,
            duration=10,
            targets=TARGETS,
        )
    external = Targets(links=["client->bootstrap0"], node_faults=False)
    with pytest.raises(ScheduleError, match="does not support node faults"):
        build_schedule(
            NemesisConfig(actions=[TimedAction(at=1, kind="restart", node=1)]),
            seed=1,
            duration=10,
            targets=external,
        )


def test_random_kinds_without_targets_are_left_out() -> None:
    external = Targets(links=["client->bootstrap0"], node_faults=False)
    schedule = build_schedule(random_config(), seed=3, duration=200, targets=external)
    assert schedule and {f.kind for f in schedule} <= {"delay", "drop_request"}


def test_bad_random_config() -> None:
    with pytest.raises(ValidationError, match="positive weight"):
        RandomNemesis(mix={"delay": 0}, intensity=1)
    with pytest.raises(ValidationError, match="calm_for"):
        RandomNemesis(mix={"delay": 1}, intensity=1, calm_every=10, calm_for=10)
    with pytest.raises(ValidationError):
        RandomNemesis(mix={"no_such_fault": 1}, intensity=1)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    duration=st.floats(6, 120),
    intensity=st.floats(0.01, 2),
    calm=st.booleans(),
)
def test_a_random_mix_never_yields_an_empty_schedule(
    seed: int, duration: float, intensity: float, calm: bool
) -> None:
    """However few faults a minute the mix asks for, a seeded run gets at least one, placed
    where it fits: a run that tested nothing would pass as valid."""
    extra: dict[str, object] = {"intensity": intensity, "start_after": 1, "duration": (1, 4)}
    if calm:
        extra |= {"calm_every": 10, "calm_for": 5}
    schedule = build_schedule(random_config(**extra), seed=seed, duration=duration, targets=TARGETS)
    assert [f for f in schedule if f.origin == "random"]
    for fault in schedule:
        assert fault.at >= 1 and fault.end <= duration
        if calm:
            assert fault.at % 10 < 5
    again = build_schedule(random_config(**extra), seed=seed, duration=duration, targets=TARGETS)
    assert again == schedule  # still fully determined by the seed


def test_a_random_mix_with_no_room_is_refused() -> None:
    config = random_config(start_after=8, duration=(3, 5))
    assert no_room(config.random, 10) is not None  # type: ignore[arg-type]
    assert no_room(config.random, 12) is None  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="leave no room"):
        build_schedule(config, seed=1, duration=10, targets=TARGETS)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_random_node_faults_keep_clear_of_the_fixed_ones(seed: int) -> None:
    """A random pause that began just before a fixed kill's heal would hold the restart
    (it waits for the paused controller), and the whole schedule behind it: random node
    faults keep out of each fixed node fault's window and the settling after it."""
    config = NemesisConfig(
        actions=[
            TimedAction(at=10, kind="kill", node=2, duration=1),
            TimedAction(at=30, kind="restart", node=1),
        ],
        random=RandomNemesis(mix={"pause": 1, "delay": 1}, intensity=40, duration=(1, 3)),
    )
    schedule = build_schedule(config, seed=seed, duration=60, targets=TARGETS)
    windows = [(10, 11 + NODE_SETTLE_S), (30, 30 + NODE_SETTLE_S)]
    pauses = [f for f in schedule if f.origin == "random" and f.kind == "pause"]
    for f in pauses:
        assert all(f.end < lo or f.at > hi for lo, hi in windows), (f.at, f.end)
    delays = [f for f in schedule if f.kind == "delay"]
    assert pauses or delays  # the random mix still faults
