"""Process and topic ranks: looked up by the names' 64-bit hashes when those differ (a hash table
of longs), by the names otherwise; both give every row the same ranks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from txnchaos.analysis.load import prepare_run
from txnchaos.analysis.spark.load import load_run
from txnchaos.analysis.spark.projections import Projections
from txnchaos.analysis.spark.summary import summarize

from .helpers import build


def _ranks(proj: Projections) -> list[tuple[object, ...]]:
    df = proj.with_ranks(proj.observations())
    cols = ("process", "topic", "partition", "op_id", "item", "_proc_rank", "_tp")
    return sorted(tuple(r) for r in df.select(*cols).collect())


def test_ranks_by_hash_and_by_name_agree(spark: SparkSession, tmp_path: Path) -> None:
    build(seed=11).write(tmp_path)
    data = load_run(spark, prepare_run(tmp_path))
    summary = summarize(data.history)
    assert set(summary.process_keys) == set(summary.processes)
    assert set(summary.topic_keys) == set(summary.topics)
    by_hash = Projections(data, summary, persist=False)
    procs, topics = by_hash._rank_tables
    assert "_proc_key" in procs.columns and "_topic_key" in topics.columns
    # colliding hashes: the tables fall back to the names
    same = dataclasses.replace(
        summary,
        process_keys=dict.fromkeys(summary.processes, 7),
        topic_keys=dict.fromkeys(summary.topics, 7),
    )
    by_name = Projections(data, same, persist=False)
    procs, topics = by_name._rank_tables
    assert "_proc_name" in procs.columns and "_topic_name" in topics.columns
    got = _ranks(by_hash)
    assert got == _ranks(by_name)
    # every process has its rank in sorted order; rows without a topic have no tp key
    names = summary.processes
    assert all(names[r[5]] == r[0] for r in got)  # type: ignore[index]
    assert all((r[6] is None) == (r[1] is None or r[2] is None) for r in got)


def test_summary_keys_are_sparks_xxhash64(spark: SparkSession, tmp_path: Path) -> None:
    build(seed=12).write(tmp_path)
    data = load_run(spark, prepare_run(tmp_path))
    summary = summarize(data.history)
    names = spark.createDataFrame([(p,) for p in summary.processes], "n string")
    want = {r["n"]: r["k"] for r in names.select("n", F.xxhash64("n").alias("k")).collect()}
    assert summary.process_keys == want
