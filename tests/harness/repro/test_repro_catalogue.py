"""The reproduction catalogue without running clusters: every shipped entry is a valid
scenario with a bug configuration and a defended one, configurations are chosen as
the options say, a configuration's scenario is the entry's plus its settings, and a
verdict is held against a prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from txnchaos.cluster.settings import SPECS
from txnchaos.harness.repro.catalogue import SHIPPED, CatalogueError, find, load_catalogue
from txnchaos.harness.repro.command import (
    chosen,
    derived_scenario,
    matches,
    outcome_of,
    unpredicted_release,
    write_scenario,
)
from txnchaos.harness.repro.spec import Configuration, Prediction, ReproSpec
from txnchaos.harness.run.scenario import load_scenario


def test_every_shipped_entry_has_a_bug_and_a_defense() -> None:
    entries = load_catalogue(SHIPPED)
    assert len(entries) >= 4
    for entry in entries.values():
        configs = entry.spec.configurations
        assert any(c.expect.verdict == "invalid" and c.expect.anomalies for c in configs.values())
        assert any(c.expect.verdict == "valid" for c in configs.values())
        for c in configs.values():
            if c.kafka_version is None:
                assert set(c.settings) <= set(SPECS), c.settings  # settings a node knows


def test_choosing_configurations() -> None:
    entry = find("producer-state-expiry", SHIPPED)
    assert list(chosen(entry, None, None)) == ["bug", "defended"]
    assert list(chosen(entry, "defended", None)) == ["defended"]
    with pytest.raises(CatalogueError, match="no configuration 'nope'"):
        chosen(entry, "nope", None)
    at_tv1 = chosen(entry, None, 1)
    assert all(c.settings["transaction.version"] == 1 for c in at_tv1.values())
    with pytest.raises(CatalogueError, match="no reproduction named"):
        find("no-such-bug", SHIPPED)


def test_a_configuration_runs_the_entry_with_its_settings(tmp_path: Path) -> None:
    entry = find("producer-state-expiry", SHIPPED)
    bug = entry.spec.configurations["bug"]
    path = tmp_path / "bug.yaml"
    write_scenario(derived_scenario(entry, bug, seed=99, name="bug"), path)
    scenario = load_scenario(path)
    assert scenario.seed == 99
    # the run knows which entry and configuration it is (its report says so)
    assert scenario.repro is not None and scenario.repro.configuration == "bug"
    assert scenario.repro.configurations == entry.spec.configurations
    assert scenario.cluster.settings["txnchaos.bug.producer.expiry.ignores.open.transactions"]
    assert scenario.cluster.settings["producer.id.expiration.ms"] == 2000  # the entry's own
    assert (scenario.expect.verdict, scenario.expect.anomalies) == (
        "invalid",
        ["hanging_transactions"],
    )
    assert scenario.workload == entry.scenario.workload
    assert scenario.nemesis == entry.scenario.nemesis


def test_a_prediction_is_met_by_its_verdict_and_its_checkers() -> None:
    bug = Configuration(expect=Prediction(verdict="invalid", anomalies=["aborted_read"]))
    assert matches(bug, "invalid", {"aborted_read": 3, "lost_write": 1})
    assert not matches(bug, "invalid", {"lost_write": 1})  # another anomaly is not the bug
    assert not matches(bug, "valid", {})
    defended = Configuration(expect=Prediction(verdict="valid"))
    assert matches(defended, "valid", {})
    assert not matches(defended, "invalid", {"aborted_read": 1})


def test_a_node_error_is_found_beside_the_checkers(tmp_path: Path) -> None:
    """An exception the nodes logged (the verdict's node_error findings) is listed with the
    checkers' anomalies, counted, so an entry can predict it; a client crash is not."""
    findings = [
        {"kind": "node_error", "exception": "java.lang.IllegalArgumentException", "count": 4},
        {"kind": "node_error", "exception": "java.lang.IllegalStateException"},
        {"kind": "client_crash", "process": "w0"},
    ]
    checkers = {"hanging_transactions": {"status": "invalid", "anomaly_count": 1}}
    verdict = {"status": "invalid", "checkers": checkers, "findings": findings}
    (tmp_path / "verdict.json").write_text(json.dumps(verdict))
    verdict_, found = outcome_of(tmp_path, 1)
    assert (verdict_, found) == ("invalid", {"hanging_transactions": 1, "node_error": 5})
    bug = Configuration(
        expect=Prediction(verdict="invalid", anomalies=["hanging_transactions", "node_error"])
    )
    assert matches(bug, verdict_, found)


def test_invalid_entries_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="needs a configuration where the bug is present"):
        ReproSpec(
            report="X",
            design_section="Y",
            symptom="Z",
            configurations={"ok": Configuration(expect=Prediction(verdict="valid"))},
        )
    with pytest.raises(ValidationError, match="names no anomalies"):
        Prediction(verdict="valid", anomalies=["aborted_read"])
    plain = yaml.safe_load((SHIPPED / "fetch-ignores-aborted-index.yaml").read_text())
    plain.pop("repro")
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    with pytest.raises(CatalogueError, match="needs a `repro:` block"):
        load_catalogue(tmp_path)
    with pytest.raises(CatalogueError, match="no reproduction catalogue"):
        load_catalogue(tmp_path / "missing")


def test_configurations_on_apache_kafka_releases(tmp_path: Path) -> None:
    entry = find("produce-after-abort", SHIPPED)
    ours = ["tv0", "tv1", "tv2"]
    on_kafka = list(chosen(entry, None, None, cluster="apache-kafka"))
    assert on_kafka and all(entry.spec.configurations[n].kafka_version for n in on_kafka)
    assert list(chosen(entry, None, None, cluster="txnchaos")) == ours
    assert list(chosen(entry, None, None)) == [*on_kafka, *ours]
    # --kafka-version V: the configurations on that release only
    at_440 = chosen(entry, None, None, kafka_version="4.4.0")
    assert at_440 and {c.kafka_version for c in at_440.values()} == {"4.4.0"}
    assert chosen(entry, None, None, kafka_version="4.0.0") == {}
    assert unpredicted_release(entry, "4.0.0") == "kafka-4.0.0"
    # a release's configuration runs the entry on the kafka launcher at that release
    name, config = next((n, c) for n, c in at_440.items() if c.expect.verdict == "invalid")
    path = tmp_path / f"{name}.yaml"
    write_scenario(derived_scenario(entry, config, seed=7), path)
    scenario = load_scenario(path)
    assert (scenario.cluster.launcher, scenario.cluster.kafka_version) == ("kafka", "4.4.0")
    assert scenario.cluster.settings["transaction.partition.verification.enable"] is False
    assert scenario.expect.verdict == "invalid" and scenario.seed == 7
    # ... and our cluster's configurations keep the entry's launcher
    ours_tv0 = derived_scenario(entry, entry.spec.configurations["tv0"], seed=None)
    assert ours_tv0["cluster"]["launcher"] == "local"
    # an unpredicted release: the entry as it is, on that release, nothing expected of it
    plain = derived_scenario(entry, None, seed=None, kafka_version="4.0.0")
    assert plain["cluster"]["kafka_version"] == "4.0.0" and plain["expect"]["verdict"] == "valid"


def test_a_kafka_configuration_takes_kafka_settings_only(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="Apache Kafka has no such setting"):
        Configuration(
            kafka_version="4.4.0",
            settings={"txnchaos.bug.coordinator.load.skips.pending.markers": True},
            expect=Prediction(verdict="invalid", anomalies=["hanging_transactions"]),
        )
    with pytest.raises(ValidationError, match="kafka_version"):
        Configuration(kafka_version="4.4", expect=Prediction(verdict="valid"))
    # the entry's own settings must be Kafka's too, for a configuration on a release
    data = yaml.safe_load((SHIPPED / "producer-state-expiry.yaml").read_text())
    data["repro"]["configurations"]["kafka"] = {
        "kafka_version": "4.4.0",
        "expect": {"verdict": "valid"},
    }
    data["cluster"]["settings"]["txnchaos.bug.transaction.timeout.never.fires"] = True
    (tmp_path / "entry.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogueError, match=r"configuration kafka: txnchaos\.bug"):
        load_catalogue(tmp_path)
    entry = find("producer-state-expiry", SHIPPED)
    assert unpredicted_release(entry, "4.4.0") == "kafka-4.4.0"
