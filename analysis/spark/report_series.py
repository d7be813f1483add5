"""The Spark job behind the report's latency and open-transaction series (report_series.py
turns its counts into the series)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..report_series import BINS_PER_DECADE, SEC, bucket_seconds, series_of_counts


def report_series(h: DataFrame, txns: DataFrame, t0_ns: int, t1_ns: int) -> dict[str, Any]:
    """Latency quantiles (ms) per (bucket, type) and open transactions per bucket, for a
    history ``h`` spanning [t0_ns, t1_ns) and its transactions ``txns`` (``begin_ns``,
    ``end_ns``)."""
    bucket_s = bucket_seconds(t1_ns - t0_ns)
    width = bucket_s * SEC

    def bucket(col: str) -> Any:
        return F.floor((F.col(col) - F.lit(t0_ns)) / F.lit(width)).cast("long")

    first = F.col("item").isNull() | (F.col("item") == 0)
    lat = F.col("complete_ns") - F.col("invoke_ns")
    latency = (
        h.filter(first & F.col("complete_ns").isNotNull() & (lat >= 0))
        .groupBy(
            bucket("invoke_ns").alias("b"),
            "type",
            F.floor(F.log10(F.greatest(lat, F.lit(1))) * BINS_PER_DECADE).alias("bin"),
        )
        .agg(F.count(F.lit(1)).alias("n"))
    )
    ends = F.col("end_ns").isNotNull()
    open_ = (
        txns.select(bucket("begin_ns").alias("b"), F.lit(1).alias("d"))
        .unionByName(
            txns.filter(ends).select((bucket("end_ns") + 1).alias("b"), F.lit(-1).alias("d"))
        )
        .groupBy("b")
        .agg(F.sum("d").alias("n"))
    )
    rows = (
        latency.select(F.lit("L").alias("tag"), "b", "type", "bin", "n")
        .unionByName(
            open_.select(
                F.lit("T").alias("tag"),
                "b",
                F.lit(None).cast("string").alias("type"),
                F.lit(None).cast("long").alias("bin"),
                F.col("n").cast("long").alias("n"),
            )
        )
        .collect()
    )
    hist: dict[tuple[int, str], dict[int, int]] = {}
    change: dict[int, int] = {}
    for r in rows:
        if r["tag"] == "L":
            hist.setdefault((int(r["b"]), r["type"]), {})[int(r["bin"])] = int(r["n"])
        else:
            change[int(r["b"])] = change.get(int(r["b"]), 0) + int(r["n"])
    return series_of_counts(hist, change, t0_ns, t1_ns)
