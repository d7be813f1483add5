"""The command-level behaviour: files written, exit codes, partial run directories."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from txnchaos.analysis.spark import pipeline
from txnchaos.rundir.compact import compact_run
from txnchaos.rundir.run_dir import RunDirError, write_run_info
from txnchaos.rundir.schema import EventType, encode_value
from txnchaos.rundir.writer import HistoryWriter
from txnchaos_testing.synthetic import Synth, SynthConfig


def test_main_analyze_writes_verdict_and_report(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth = Synth(SynthConfig()).build()
    synth.inject_aborted_read()
    synth.write(tmp_path)
    assert pipeline.main_analyze(tmp_path) == 1
    out = capsys.readouterr().out
    assert "INVALID" in out and "aborted_read" in out
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["status"] == "invalid"
    assert verdict["checkers"]["aborted_read"]["counts"] == {"aborted_read": 1}
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "aborted_read" in html
    assert not re.findall(r"https?://(?!www\.w3\.org/)", html)  # only XML namespaces


def test_unreadable_run_dir_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pipeline.main_analyze(tmp_path / "missing") == 2
    assert "does not exist" in capsys.readouterr().err
    write_run_info(tmp_path, scenario="x")
    assert pipeline.main_analyze(tmp_path) == 2
    assert "no history" in capsys.readouterr().err


def test_broken_parquet_exits_2(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run_info(tmp_path, scenario="x")
    (tmp_path / "history.parquet").write_bytes(b"not parquet at all")
    assert pipeline.main_analyze(tmp_path) == 2
    assert "history" in capsys.readouterr().err


def test_partial_run_from_json_lines_is_analysable(spark: SparkSession, tmp_path: Path) -> None:
    """A crashed run: JSON Lines only, no final state, no metrics, a commit in doubt."""
    write_run_info(tmp_path, scenario="crash", seed=3, complete=False)
    with HistoryWriter(tmp_path, "w0") as w:
        for txn in range(3):
            w.complete(w.invoke(EventType.BEGIN, txn=txn), "ok")
            for i in range(2):
                item = {"topic": "t", "partition": 0, "value": encode_value("w0", txn, i)}
                w.complete(
                    w.invoke(EventType.SEND, txn=txn, items=[item]),
                    "ok",
                    items=[{**item, "offset": txn * 3 + i}],
                )
            commit = w.invoke(EventType.COMMIT, txn=txn)
            if txn < 2:
                w.complete(commit, "ok")
    with HistoryWriter(tmp_path, "c0") as c:
        c.record(EventType.ASSIGN, items=[{"topic": "t", "partition": 0, "offset": 0}])
        c.record(
            EventType.POLL,
            items=[
                {
                    "topic": "t",
                    "partition": 0,
                    "offset": o,
                    "value": encode_value("w0", o // 3, o % 3),
                }
                for o in (0, 1, 3, 4)
            ],
        )
    # the analysis reads a run directory only: compacting it is the writer side's
    with pytest.raises(RunDirError, match=r"no history\.parquet: the run was not compacted"):
        pipeline.analyze(tmp_path, spark=spark)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history", "run.json"]
    assert compact_run(tmp_path) == ["compacted 2 history file(s) into history.parquet"]
    v = pipeline.analyze(tmp_path, spark=spark)
    assert v.status == "valid", v.summary()
    assert v.stats["transactions"] == {"committed": 2, "indeterminate": 1}
    assert v.checkers["indeterminate_commit"].status == "unknown"  # no final read
    assert v.checkers["metrics"].status == "unknown"
    assert (tmp_path / "history.parquet").exists() and (tmp_path / "report.html").exists()
    assert compact_run(tmp_path) == []


def test_metrics_unsupported_is_unknown_not_invalid(spark: SparkSession, tmp_path: Path) -> None:
    synth = Synth(SynthConfig(metrics=False)).build()
    synth.write(tmp_path)
    shutil.rmtree(tmp_path / "metrics", ignore_errors=True)
    v = pipeline.analyze(tmp_path, spark=spark, write=False)
    assert v.checkers["metrics"].status == "unknown"
    assert "no metrics" in (v.checkers["metrics"].reason or "")
    assert v.exit_code == 0


def test_adaptive_execution_is_on_for_the_checkers_only(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The anomaly queries run with adaptive execution; the session is left as it was."""
    seen: list[str | None] = []
    real = pipeline._anomaly_results

    def spy(frames: list[DataFrame], n: int) -> pipeline.AnomalyResults:
        seen.append(spark.conf.get("spark.sql.adaptive.enabled"))
        return real(frames, n)

    monkeypatch.setattr(pipeline, "_anomaly_results", spy)
    Synth(SynthConfig()).build().write(tmp_path)
    before = spark.conf.get("spark.sql.adaptive.enabled")
    pipeline.analyze(tmp_path, spark=spark, write=False)
    # one anomaly job per group, and one for the side checkers' frames when they have any
    assert len(seen) in (len(pipeline.SCHEDULE.groups), len(pipeline.SCHEDULE.groups) + 1)
    assert set(seen) == {"true"}
    assert spark.conf.get("spark.sql.adaptive.enabled") == before == "false"
