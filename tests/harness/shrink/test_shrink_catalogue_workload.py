"""`txnchaos shrink` reduces the workload when there is no fault to drop, on a real invalid
run of the catalogue case lso-ignores-open-transactions (its bug switch on: the LSO is the
high watermark, so read_committed readers see open transactions that later abort). The
search halves the workload's duration and thins the writers while the readers still catch
aborted records; it cannot drop the readers (the anomaly is theirs). The shrunk scenario is
smaller and its re-run is still flagged by aborted_read (reference checkers)."""

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
from txnchaos.harness.shrink.search import size_of
from txnchaos.rundir.verdict_file import anomalies_by_checker

pytestmark = pytest.mark.integration

ENTRY = "lso-ignores-open-transactions"
BUDGET_S = 900.0  # never reached: at most six re-runs here


@pytest.mark.nightly  # minutes on two cores: six re-runs; the suite shrinks a case in
# test_shrink_catalogue_case.py and the search itself in test_search.py
def test_shrinking_a_run_without_faults_makes_its_workload_smaller(tmp_path: Path) -> None:
    scenario = entry_scenario(ENTRY, {"txnchaos.bug.lso.ignores.open.transactions": True})
    scenario["duration"] = 6
    scenario["final"] = {"quiescence_timeout": 8, "read_timeout": 20}
    run_dir, flagged = invalid_run(scenario, tmp_path)
    assert "aborted_read" in flagged, flagged

    result = shrink_run(run_dir, BUDGET_S, RunJudge("reference"), console=Console(file=sys.stderr))

    assert result.scenario is not None and result.smaller, result
    shrunk = yaml.safe_load(result.scenario.read_text())
    assert size_of(shrunk).smaller_than(size_of(scenario))
    assert any(u["kind"] == "read_committed_consumer" for u in shrunk["workload"]["users"])
    rerun = verdict_of(attempt_of(run_dir, shrunk))
    assert rerun["status"] == "invalid"
    assert "aborted_read" in anomalies_by_checker(rerun)
