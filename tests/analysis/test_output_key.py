"""projections.output_key: the pair of hashes that matches a copier's outputs to its inputs."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from txnchaos.analysis.spark.projections import output_key


def _keys(spark: SparkSession, rows: list[tuple[str | None, str | None]]) -> list[tuple]:
    df = spark.createDataFrame(rows, "g string, s string")
    k1, k2 = output_key(F.col("g"), F.col("s"))
    return [tuple(r) for r in df.select(k1, k2).collect()]


def test_keys_tell_group_and_source_apart(spark: SparkSession) -> None:
    rows = [("g1", "w|1|0"), ("g2", "w|1|0"), ("g1", "w|1|1"), ("g1w", "|1|0"), ("g1", "w|1|0")]
    keys = _keys(spark, rows)
    # the same (group, source) gets the same pair; any other pair differs in both halves
    assert keys[0] == keys[4]
    distinct = keys[:4]
    assert len({k1 for k1, _ in distinct}) == 4
    assert len({k2 for _, k2 in distinct}) == 4


def test_the_two_hashes_are_seeded_differently(spark: SparkSession) -> None:
    """The second half is not a function of the first: it hashes from another seed, so a
    collision of one half does not make the other collide too."""
    (k1, k2), *_ = _keys(spark, [("g", "s")])
    assert k1 != k2
    chained = spark.range(1).select(F.xxhash64(F.lit("g"), F.lit("s"), F.lit(0))).first()[0]
    assert k2 != chained


def test_no_key_without_both_parts(spark: SparkSession) -> None:
    assert _keys(spark, [(None, "s"), ("g", None), (None, None)]) == [(None, None)] * 3
