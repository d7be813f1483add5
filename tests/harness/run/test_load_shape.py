"""A scenario's load shape: the levels its stages give over time, and the errors that name
what is wrong with one."""

from __future__ import annotations

from typing import Any

import pytest

from txnchaos.harness.run.scenario import ScenarioError, parse_scenario

WORKLOAD = {
    "topics": [{"name": "events"}, {"name": "copies"}],
    "users": [
        {"kind": "transactional_producer", "count": 4, "topics": ["events"]},
        {"kind": "read_committed_consumer", "count": 2, "topics": ["events"]},
        {
            "kind": "eos_copier",
            "input_topics": ["events"],
            "output_topic": "copies",
            "group_id": "c",
        },
    ],
}
STAGES = [
    {"kind": "ramp", "duration": 10, "to": 1.0},
    {"kind": "steady", "duration": 10},
    {"kind": "spike", "duration": 5, "to": 3.0},
    {"kind": "steady", "duration": 10, "level": 0.5},
]


def scenario(shape: Any, duration: float = 60) -> dict[str, Any]:
    return {"name": "t", "duration": duration, "workload": WORKLOAD, "load_shape": shape}


def test_stages_ramp_hold_spike_and_hold_after_the_end() -> None:
    shape = parse_scenario(scenario({"stages": STAGES})).load_shape
    assert shape is not None
    levels = [shape.level_at(t) for t in (0, 5, 10, 19, 20, 24.9, 25, 34, 50)]
    assert levels == [0.0, 0.5, 1.0, 1.0, 3.0, 3.0, 0.5, 0.5, 0.5]
    assert shape.peak_level() == 3.0
    wl = parse_scenario(scenario({"stages": STAGES})).workload
    # consumers and the copier run their fixed 3; the producers' 4 are scaled
    assert [shape.users_at_level(wl, x) for x in (0.0, 0.5, 1.0, 3.0)] == [3, 5, 7, 15]


def test_a_spike_returns_to_the_level_before_it() -> None:
    stages = [
        {"kind": "steady", "duration": 5, "level": 2},
        {"kind": "spike", "duration": 1, "to": 4},
    ]
    shape = parse_scenario(scenario({"stages": stages})).load_shape
    assert shape is not None
    assert (shape.level_at(5.5), shape.level_at(6), shape.level_at(100)) == (4.0, 2.0, 2.0)


@pytest.mark.parametrize(
    "shape, named",
    [
        ({"stages": []}, "load_shape.stages: List should have at least 1 item"),
        ({"stages": [{"kind": "burst", "duration": 5}]}, "load_shape.stages.0: Input tag 'burst'"),
        (
            {"stages": [{"kind": "ramp", "duration": 5}]},
            "load_shape.stages.0.ramp.to: Field required",
        ),
        (
            {"stages": [{"kind": "ramp", "duration": 0, "to": 1}]},
            "load_shape.stages.0.ramp.duration",
        ),
        ({"stages": [{"kind": "spike", "duration": 1, "to": -1}]}, "load_shape.stages.0.spike.to"),
        ({"stages": [{"kind": "spike", "duration": 1, "to": 101}]}, "less than or equal to 100"),
        ({"stages": [{"kind": "steady", "duration": 5}]}, "stages.0 (steady): the first stage"),
        ({"stages": STAGES, "scaled": ["nope"]}, "load_shape.scaled: unknown user kind 'nope'"),
        ({"stages": STAGES, "scaled": ["eos_copier"], "x": 1}, "load_shape.x: Extra inputs"),
        (
            {"stages": STAGES, "scaled": ["idempotent_producer"]},
            "no user of kind idempotent_producer",
        ),
        ({"stages": [{"kind": "ramp", "duration": 90, "to": 1}]}, "stages last 90s, longer than"),
        (
            {"stages": [{"kind": "ramp", "duration": 5, "to": 100}], "scaled": []},
            "load_shape.scaled",
        ),
    ],
)
def test_bad_shapes_are_refused_naming_the_field(shape: dict[str, Any], named: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario(shape), "load.yaml")
    assert named in str(err.value)


def test_a_peak_beyond_ten_thousand_users_is_refused() -> None:
    users = [{**WORKLOAD["users"][0], "count": 200}]  # type: ignore[dict-item]
    data = scenario({"stages": [{"kind": "spike", "duration": 1, "to": 60}]})
    data["workload"] = {**WORKLOAD, "users": users}
    with pytest.raises(ScenarioError, match="its peak runs 12000 users"):
        parse_scenario(data)


def test_a_shorter_run_keeps_the_shape_cut_where_it_ends() -> None:
    """scenario.yaml of a run with a shorter --duration holds the shape as it ran."""
    import yaml

    from txnchaos.harness.run.scenario import scenario_as_run

    s = parse_scenario(scenario({"stages": STAGES}))
    ran = parse_scenario(yaml.safe_load(scenario_as_run(s, 1, 5, "local")))
    assert ran.load_shape is not None
    assert [st.model_dump() for st in ran.load_shape.stages] == [
        {"kind": "ramp", "duration": 5.0, "to": 0.5}
    ]
    ran = parse_scenario(yaml.safe_load(scenario_as_run(s, 1, 22, "local")))
    assert ran.load_shape is not None
    assert [(st.kind, st.duration) for st in ran.load_shape.stages] == [
        ("ramp", 10),
        ("steady", 10),
        ("spike", 2),
    ]
