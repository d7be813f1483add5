"""`txnchaos run scenarios/tv2-smoke.yaml`: our own producer's user kinds (tv2_producer,
tv2_copier) under faults, judged by every checker, with the verdict the scenario expects; the
run's small history judged without a JVM, and the Spark pipeline agreeing on every part of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.analysis.engine_support import assert_same_verdict
from txnchaos.analysis.analyze import analyze
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def test_tv2_smoke_run_is_valid(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "scenarios/tv2-smoke.yaml", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
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

    # a small history: `txnchaos run` judged it with the reference engine, and Spark, judging
    # the same run directory, gives the same verdict and the same report series
    assert verdict["engine"] == "reference"
    reference = analyze(out, engine="reference")
    assert_same_verdict(spark_analyze(out, spark=spark), reference)
    again = json.loads(json.dumps(reference.to_json(), default=str))
    assert {**again, "timings": None} == {**verdict, "timings": None}
