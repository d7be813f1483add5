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


def _largest_copier_batch(name: str, records: int) -> int:
    """Bytes of the largest batch a copier sends: all of one transaction's copies to one
    partition (values ``<name>-<index>|<txn>|<i>`` with six-digit transaction numbers, keys of
    up to four characters, timestamps up to 10^6 ms apart), uncompressed, as the cluster's own
    encoder writes them."""
    from txnchaos.cluster.protocol.record_batch import HEADER_SIZE
    from txnchaos.cluster.protocol.records import encode_record
    from txnchaos.rundir.schema import encode_value

    body = sum(
        len(encode_record(i, 10**6, b"9999", encode_value(f"{name}-9", 999_999, i).encode()))
        for i in range(records)
    )
    return HEADER_SIZE + body


def test_copier_batches_fit_the_segments() -> None:
    """A batch larger than a segment is refused (RECORD_LIST_TOO_LARGE); a copier polls the
    same inputs again after the abort and copies nothing for the rest of the run (the process
    mix's copier did so from its fifth second on, from 33a4cc4's 2 KiB segments until the
    seventh round of mutation analysis)."""
    checked = 0
    for path in sorted(SCENARIOS.rglob("*.yaml")):
        s = load_scenario(path)
        broker_segment = s.cluster.settings.get("log.segment.bytes")
        for user in s.workload.users:
            if user.kind not in ("eos_copier", "tv2_copier"):
                continue
            # the output topic's own segment.bytes, else the brokers'
            topic = next(t for t in s.workload.topics if t.name == user.output_topic)
            segment = topic.configs.get("segment.bytes", broker_segment)
            if segment is None:
                continue
            size = _largest_copier_batch(user.name or user.kind, user.max_records_per_txn)
            assert size <= int(segment), (
                f"{path.name}: {user.name}'s {user.max_records_per_txn} copies per transaction "
                f"make a {size}-byte batch, larger than its segments ({segment} bytes)"
            )
            checked += 1
    assert checked >= 1
