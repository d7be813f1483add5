"""`txnchaos run scenarios/tv2-smoke.yaml`: our own producer's user kinds (tv2_producer,
tv2_copier) under faults, judged by every checker, with the verdict the scenario expects; the
run judged by PySpark, and the plain rules agreeing on every part of its verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.analysis.engine_support import assert_spark_wrote_the_rules_verdict
from txnchaos.analysis.analyze import analyze

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def test_tv2_smoke_run_is_valid(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "scenarios/tv2-smoke.yaml", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "valid", verdict

    history = pq.read_table(out / "history.parquet").to_pylist()
    ours = [r for r in history if str(r["process"]).startswith(("tv2-writer", "tv2-copier"))]
    kinds = {(r["type"], r["outcome"]) for r in ours}
    assert {("init", "ok"), ("commit", "ok"), ("send", "ok"), ("send_offsets", "ok")} <= kinds
    # our producer records its exact producer id and epoch on every completed op
    commits = [r for r in ours if r["type"] == "commit" and r["outcome"] == "ok"]
    assert all(r["producer_id"] is not None and r["producer_epoch"] is not None for r in commits)

    # `txnchaos run` judged it with PySpark (its session started while the workload ran), and
    # the plain rules, judging the same run directory, give the same verdict
    assert verdict["spark"]["session"] == "started during the run", verdict["spark"]
    assert "judged by PySpark" in proc.stdout
    assert_spark_wrote_the_rules_verdict(verdict, analyze(out, engine="reference", write=False))
