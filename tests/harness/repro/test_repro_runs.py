"""Catalogue entries reproduced for real, as a user runs them: `txnchaos repro NAME`
runs the bug configuration and the defended one (real nodes, real confluent-kafka
clients, the real analysis), and each verdict is the predicted one — the bug detected by
the predicted checkers, the defended cluster valid.

Each entry costs two or three runs and their analyses (55-110 s), so the suite runs one
(an isolation bug without faults); the three late-request entries of seed 000 run together,
failing and defended, in test_late_request_cases.py; the 2PC entry runs its bug
configuration only (its defense is scenarios/dual-write.yaml's valid run). Every entry, on
several seeds, is `bench/detection.py` (its matrix is in the README); each switch on and
off is also tests/integration/test_bug_switches.py and tests/cluster/test_bug_switches.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from txnchaos.harness.repro.catalogue import SHIPPED, load_catalogue

pytestmark = pytest.mark.integration

IN_THE_SUITE = ["fetch-ignores-aborted-index"]


def test_the_entries_in_the_suite_are_in_the_catalogue() -> None:
    assert set(IN_THE_SUITE) <= set(load_catalogue(SHIPPED))


@pytest.mark.parametrize("name", IN_THE_SUITE)
def test_the_bug_is_detected_and_the_defense_closes_it(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.harness.cli", "repro", name, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads((out / "repro.json").read_text())
    outcomes = {o["configuration"]: o for o in result["outcomes"]}
    entry = load_catalogue(SHIPPED)[name]
    assert set(outcomes) == set(entry.spec.configurations)
    for config_name, config in entry.spec.configurations.items():
        o = outcomes[config_name]
        assert o["matched"] and o["verdict"] == config.expect.verdict, o
        assert set(config.expect.anomalies) <= set(o["anomalies"]), o
        assert (out / config_name / "verdict.json").is_file()


def test_a_prepared_transaction_outliving_the_timeout_is_aborted_with_the_bug(
    tmp_path: Path,
) -> None:
    """The writer stays down (the crash fault's duration) past transaction.max.timeout.ms:
    with the switch the coordinator aborts its prepared transaction, the database keeps it."""
    name = "prepared-transaction-timed-out"
    out = tmp_path / name
    command = ["repro", name, "--config", "bug", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.harness.cli", *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (outcome,) = json.loads((out / "repro.json").read_text())["outcomes"]
    assert outcome["configuration"] == "bug" and outcome["verdict"] == "invalid", outcome
    assert "dual_write" in outcome["anomalies"], outcome
    dual_write = json.loads((out / "bug" / "verdict.json").read_text())["checkers"]["dual_write"]
    assert dual_write["counts"]["database_only"] >= 1, dual_write
    assert dual_write["counts"]["kafka_only"] == 0, dual_write
