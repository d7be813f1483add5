"""Shared helpers: build a synthetic run, analyse it, read counts."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis.spark.pipeline import analyze
from txnchaos.analysis.verdict import Verdict
from txnchaos_testing.synthetic import Synth, SynthConfig


def build(**cfg: object) -> Synth:
    return Synth(SynthConfig(**cfg)).build()  # type: ignore[arg-type]


def judge(spark: SparkSession, synth: Synth, tmp: Path, write: bool = False) -> Verdict:
    synth.write(tmp)
    return analyze(tmp, spark=spark, write=write)


def judge_by_reference(synth: Synth, tmp: Path) -> Verdict:
    """The verdict of the plain-Python reference engine (no JVM), as ``txnchaos analyze
    --engine reference`` gives it."""
    from txnchaos.analysis.analyze import analyze as analyze_with

    synth.write(tmp)
    return analyze_with(tmp, engine="reference", write=False)


def counts(v: Verdict) -> dict[str, dict[str, int]]:
    return {name: {k: n for k, n in c.counts.items() if n} for name, c in v.checkers.items()}
