"""Scenario files: the shipped ones load; invalid ones get errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from txnchaos.harness.run.scenario import (
    ScenarioError,
    load_scenario,
    parse_scenario,
    scenario_as_run,
)

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"

MINIMAL = {
    "name": "t",
    "workload": {
        "topics": [{"name": "events"}],
        "users": [{"kind": "transactional_producer", "topics": ["events"]}],
    },
}


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_load(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name and scenario.workload.users


def test_errors_name_the_field() -> None:
    bad = {**MINIMAL, "cluster": {"brokers": 0, "launcer": "local"}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(bad, "s.yaml")
    text = str(err.value)
    assert "cluster.brokers: Input should be greater than or equal to 1" in text
    assert "cluster.launcer: Extra inputs are not permitted" in text


def test_nested_workload_and_nemesis_errors() -> None:
    bad = {
        **MINIMAL,
        "nemesis": {"actions": [{"at": 1, "kind": "kill", "duration": 2}]},
    }
    with pytest.raises(ScenarioError, match=r"nemesis\.actions\.0.*needs `node`"):
        parse_scenario(bad)
    crash = {**MINIMAL, "nemesis": {"actions": [{"at": 1, "kind": "crash_consumer"}]}}
    with pytest.raises(ScenarioError, match="crash_consumer needs a read_committed_consumer"):
        parse_scenario(crash)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nworkload: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML at line"):
        load_scenario(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ScenarioError, match="a scenario is a YAML mapping"):
        load_scenario(scalar)


def test_cluster_cpus() -> None:
    placed = parse_scenario({**MINIMAL, "cluster": {"cpus": "0-1,3"}})
    assert placed.cluster.cpus == "0-1,3"
    with pytest.raises(ScenarioError, match=r"cluster\.cpus: .*'x' is not a CPU number"):
        parse_scenario({**MINIMAL, "cluster": {"cpus": "0,x"}})
    assert parse_scenario({**MINIMAL, "cluster": {"launcher": "docker", "cpus": "1"}})
    external = {**MINIMAL, "cluster": {"launcher": "external", "cpus": "1"}}
    with pytest.raises(ScenarioError, match="an external cluster's nodes are not the harness's"):
        parse_scenario(external)


def test_the_scenario_a_run_keeps_parses_back_to_the_scenario_that_ran() -> None:
    """scenario.yaml in a run directory: every shipped scenario, with the command line's
    overrides, gives back exactly the scenario that ran."""
    root = Path(__file__).resolve().parents[3] / "scenarios"
    files = sorted(root.rglob("*.yaml"))
    assert len(files) >= 10
    for path in files:
        s = load_scenario(path)
        assert parse_scenario(yaml.safe_load(scenario_as_run(s, s.seed, s.duration, "local"))) == (
            s.model_copy(update={"cluster": s.cluster.model_copy(update={"launcher": "local"})})
        ), path
        ran = parse_scenario(yaml.safe_load(scenario_as_run(s, 77, 5.5, s.cluster.launcher)))
        assert (ran.seed, ran.duration) == (77, 5.5)
