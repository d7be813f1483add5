"""The reference engine judges a run as the Spark pipeline does: the same verdict.json (checker
verdicts, counts, examples, stats, notes) and the same series in the report, apart from which
engine judged and the timings; ``auto`` picks it for small histories; its path never imports
pyspark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from txnchaos.analysis import analyze as engines
from txnchaos.analysis.load import prepare_run
from txnchaos.analysis.reference import judge
from txnchaos.analysis.spark.pipeline import CHECKERS
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos_testing.synthetic import Synth, SynthConfig

from .engine_support import EXAMPLES, assert_same_verdict
from .test_reference_agrees import INJECTIONS

ROOT = Path(__file__).resolve().parents[2]


def _both(spark: SparkSession, run_dir: Path) -> None:
    want = spark_analyze(run_dir, spark=spark, examples=EXAMPLES)
    have = engines.analyze(run_dir, engine="reference", examples=EXAMPLES)
    assert_same_verdict(want, have)


def test_every_injected_anomaly_same_verdict(spark: SparkSession, tmp_path: Path) -> None:
    synth = Synth(SynthConfig()).build()
    for inject in INJECTIONS:
        inject(synth)
    _both(spark, synth.write(tmp_path))
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["engine"] == "reference" and verdict["status"] == "invalid"
    assert verdict["spark"] is None
    assert "judged by the plain-Python rules" in (tmp_path / "report.html").read_text("utf-8")


def test_a_run_without_metrics_or_final_read_same_verdict(
    spark: SparkSession, tmp_path: Path
) -> None:
    synth = Synth(SynthConfig(seed=3, metrics=False, final_read=False, copiers=False)).build()
    _both(spark, synth.write(tmp_path))


def test_the_reference_covers_every_checker_in_order(tmp_path: Path) -> None:
    """A checker without a reference rule would be missing from the reference's verdicts."""
    judged = judge(Synth(SynthConfig(txns_per_writer=2)).build().write(tmp_path))
    assert list(judged) == [c.NAME for c in CHECKERS]
    assert all(j.kinds == c.KINDS for j, c in zip(judged.values(), CHECKERS, strict=True))


def test_auto_is_the_reference_for_small_histories_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = prepare_run(Synth(SynthConfig(txns_per_writer=2)).build().write(tmp_path))
    assert engines.choose_engine(run) == "spark"  # Spark judges by default, whatever the size
    assert engines.choose_engine(run, "auto") == "reference"
    assert engines.choose_engine(run, "auto", master="local[2]") == "spark"
    monkeypatch.setattr(engines, "REFERENCE_MAX_ROWS", engines.history_rows(run) - 1)
    assert engines.choose_engine(run, "auto") == "spark"
    assert engines.choose_engine(run, "reference") == "reference"


def test_the_reference_path_imports_no_pyspark(tmp_path: Path) -> None:
    """``txnchaos analyze --engine reference`` of a small run: judged, written, and pyspark
    never imported."""
    synth = Synth(SynthConfig(txns_per_writer=3))
    synth.build().inject_lost_write()
    synth.write(tmp_path)
    code = (
        "import sys\n"
        "from txnchaos.jobs.cli import main\n"
        "try:\n"
        f"    main(['analyze', {str(tmp_path)!r}, '--engine', 'reference'])\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'py4j'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.splitlines()[-2:] == ["exit 1", "[]"], out.stdout + out.stderr
    assert "judged by the plain-Python rules" in out.stdout
    assert json.loads((tmp_path / "verdict.json").read_text())["engine"] == "reference"


def test_a_verdict_is_the_same_whether_or_not_it_is_written(tmp_path: Path) -> None:
    """Writing is only writing: the stats drawn from the report's series (latency quantiles,
    committed transactions per second) are in a verdict judged with ``write=False`` too, so a
    verdict.json can be held equal to a verdict recomputed in memory."""
    run_dir = Synth(SynthConfig(txns_per_writer=4)).build().write(tmp_path)
    unwritten = engines.analyze(run_dir, engine="reference", write=False).to_json()
    written = engines.analyze(run_dir, engine="reference").to_json()
    assert unwritten["stats"]["latency_ms"]
    assert {**unwritten, "timings": None} == {**written, "timings": None}
