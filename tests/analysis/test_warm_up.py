"""A session started ahead warms up on a tiny run (spark/warm_up.py): a valid run that every
checker judges, on which PySpark agrees with the plain rules; warming up leaves nothing behind
and arranges no class-archive build from its scratch directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from txnchaos.analysis.analyze import analyze
from txnchaos.analysis.spark import class_archive
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos.analysis.spark.warm_up import tiny_run, warm_up

from .engine_support import assert_same_verdict


def test_the_tiny_run_is_valid_and_both_engines_agree(spark: SparkSession, tmp_path: Path) -> None:
    run_dir = tiny_run(tmp_path / "run")
    reference = analyze(run_dir, engine="reference", write=False)
    assert reference.status == "valid", reference.summary()
    judged = {n for n, c in reference.checkers.items() if c.status != "unknown"}
    assert judged == set(reference.checkers) - {"dual_write"}  # no dual writer in it
    assert_same_verdict(spark_analyze(run_dir, spark=spark, write=False), reference)


def test_warming_up_leaves_nothing_behind(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(class_archive, "_build_from", [])
    monkeypatch.setattr(tempfile, "tempdir", None)  # found again, from TMPDIR
    warm_up(spark)
    assert list(tmp_path.iterdir()) == []
    assert class_archive._build_from == []
