"""`txnchaos run scenarios/dual-write.yaml`: KIP-939 dual writers crashed at each of the three
crash points by the nemesis, recovered by the seed's recovery recipe, and the run judged valid
by every checker, the dual_write checker having compared database and Kafka transaction by
transaction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
#: what recovery must decide after each crash point (KIP-939's recovery recipe)
RECOVERED = {
    "crash_writer_after_prepare": "aborted",  # the database never stored the prepared state
    "crash_writer_after_db_commit": "committed",  # it did: Kafka must follow it
    "crash_writer_in_recovery": "committed",  # the second recovery finishes the first's work
}


def test_dual_write_scenario_under_its_crash_faults_is_valid(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # 18 s keeps every scheduled crash (the last at 15 s) and cuts the scenario's tail
    args = ["run", "scenarios/dual-write.yaml", "--duration", "18", "--out", str(out)]
    args += ["--engine", "reference"]  # the recipe under crashes, not the engine, is tested
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "valid", verdict["checkers"]
    statuses = {name: c["status"] for name, c in verdict["checkers"].items()}
    # no copier in this scenario: that checker has nothing to judge
    assert statuses.pop("consume_transform_produce") == "unknown"
    assert set(statuses.values()) == {"valid"}, statuses
    dual = verdict["checkers"]["dual_write"]
    assert dual["checked"]["transactions"] > 0

    crashes = {f["kind"]: json.loads(f["detail"])["params"] for f in verdict["faults"]}
    for kind, outcome in RECOVERED.items():
        assert crashes[kind]["recovered"] == outcome, crashes[kind]
    assert "recovery_killed_at" in crashes["crash_writer_in_recovery"]
    assert verdict["nemesis"]["failed"] == 0, verdict["nemesis"]
