"""`txnchaos shrink` end to end on a real invalid run of a catalogue case: the misbehaving
user of produce-into-next-transaction at transaction.version 0 (aborted reads). The search
re-runs it (the anomaly comes back on the same seed), halves its workload, finds it still
fails, and writes the smaller scenario; the re-run of that scenario was flagged by the same
checkers. One user and a 4 s workload keep it to three short runs (judged by the reference
checkers: no JVM)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from tests.harness.shrink.shrink_support import entry_scenario, invalid_run, verdict_of
from txnchaos.analysis.analyze import RunJudge
from txnchaos.harness.shrink.command import shrink_run
from txnchaos.rundir.verdict_file import anomalies_by_checker

pytestmark = pytest.mark.integration

ENTRY = "produce-into-next-transaction"
BUDGET_S = 600.0  # never reached: the search has two steps to try here


def one_user_scenario() -> dict[str, Any]:
    """The entry's scenario at transaction.version 0 with its misbehaving user alone."""
    data = entry_scenario(ENTRY, {"transaction.version": 0})
    data["duration"] = 4
    users = data["workload"]["users"]
    data["workload"]["users"] = [u for u in users if "misbehavior" in u]
    data["final"] = {"quiescence_timeout": 5, "read_timeout": 20}
    return data


def test_shrinking_a_catalogue_run_keeps_its_anomaly_in_a_smaller_scenario(
    tmp_path: Path,
) -> None:
    run_dir, flagged = invalid_run(one_user_scenario(), tmp_path)
    assert "aborted_read" in flagged, flagged

    result = shrink_run(run_dir, BUDGET_S, RunJudge("reference"), console=Console(file=sys.stderr))

    assert result.scenario is not None and result.smaller, result
    assert result.reruns == 2, result  # the reproduction, then the 2 s workload
    shrunk = yaml.safe_load(result.scenario.read_text())
    assert shrunk["duration"] == 2 < 4
    (user,) = shrunk["workload"]["users"]
    assert (user["name"], user["misbehavior"]["late_request"]) == ("late", "produce_into_next")
    target = flagged - {"metrics"}
    assert set(shrunk["expect"]["anomalies"]) == target
    rerun = verdict_of(run_dir / "shrink" / "attempt-002")
    assert rerun["status"] == "invalid"
    assert target <= set(anomalies_by_checker(rerun))
