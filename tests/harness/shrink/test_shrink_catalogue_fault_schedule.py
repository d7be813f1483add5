"""`txnchaos shrink` reduces a fault schedule by delta debugging, on a real invalid run of
the catalogue case transaction-timeout-never-fires (its bug switch on): the producer crash
that leaves a transaction nobody ends, between two node pauses that have nothing to do with
it. The shrunk scenario keeps the crash alone and is still flagged by hanging_transactions
on its re-run. One writer and a 4 s workload keep the re-runs short (reference checkers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tests.harness.shrink.shrink_support import (
    attempt_of,
    entry_scenario,
    invalid_run,
    verdict_of,
)
from txnchaos.analysis.analyze import RunJudge
from txnchaos.harness.shrink.command import shrink_run
from txnchaos.rundir.verdict_file import anomalies_by_checker

pytestmark = pytest.mark.integration

ENTRY = "transaction-timeout-never-fires"
BUDGET_S = 900.0  # never reached: at most eight re-runs here
CRASH = {"at": 1.5, "kind": "crash_producer", "client": "transactional_producer"}
NOISE = [
    {"at": 0.5, "kind": "pause", "node": 1, "duration": 0.3},
    {"at": 3.0, "kind": "pause", "node": 1, "duration": 0.3},
]


@pytest.mark.nightly  # minutes on two cores: six re-runs; the suite shrinks a case in
# test_shrink_catalogue_case.py and the search itself in test_search.py
def test_shrinking_drops_the_faults_the_anomaly_does_not_need(tmp_path: Path) -> None:
    scenario = entry_scenario(ENTRY, {"txnchaos.bug.transaction.timeout.never.fires": True})
    scenario["duration"] = 4
    scenario["workload"]["users"] = [
        {**u, "count": 1} for u in scenario["workload"]["users"] if u["name"] == "writer"
    ]
    scenario["nemesis"] = {"actions": [NOISE[0], CRASH, NOISE[1]]}
    scenario["final"] = {"quiescence_timeout": 6, "read_timeout": 20}
    run_dir, flagged = invalid_run(scenario, tmp_path)
    assert "hanging_transactions" in flagged, flagged

    result = shrink_run(run_dir, BUDGET_S, RunJudge("reference"), console=Console(file=sys.stderr))

    assert result.scenario is not None and result.smaller, result
    shrunk = yaml.safe_load(result.scenario.read_text())
    (kept,) = shrunk["nemesis"]["actions"]
    assert (kept["kind"], kept["at"]) == ("crash_producer", 1.5), kept
    assert shrunk["duration"] <= 4
    rerun = verdict_of(attempt_of(run_dir, shrunk))
    assert rerun["status"] == "invalid"
    assert "hanging_transactions" in anomalies_by_checker(rerun)
