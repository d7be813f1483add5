"""The report's series that need the whole history: latency quantiles per operation type, and
transactions open over time — per time bucket, at most :data:`MAX_BUCKETS` buckets over the run,
so the report of a 10M-event history is as small as one of 100 events.

Both come from one Spark job of hash aggregations (fixed-width counts, no sort): latencies are
counted per (bucket, type, logarithmic bin) — :data:`BINS_PER_DECADE` bins per power of ten, so a
quantile read from the bins is within 6% of the exact one — and transactions per bucket of their
begin and of their end (``Projections.txns``)."""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SEC = 1_000_000_000
#: time buckets over a run, at most: ~one per pixel column of a chart
MAX_BUCKETS = 300
BINS_PER_DECADE = 20
QUANTILES = (0.5, 0.95, 0.99)


def bucket_seconds(span_ns: int) -> int:
    """Whole seconds per bucket so that a run of ``span_ns`` has at most MAX_BUCKETS."""
    return max(1, math.ceil(span_ns / SEC / MAX_BUCKETS))


def quantile_of_bins(bins: dict[int, int], q: float) -> float:
    """The ``q`` quantile (ns) of a latency histogram {bin: count}: the geometric middle of
    the bin holding it."""
    total = sum(bins.values())
    rank = q * total
    seen = 0
    for b in sorted(bins):
        seen += bins[b]
        if seen >= rank:
            return float(10 ** ((b + 0.5) / BINS_PER_DECADE))
    return float(10 ** ((max(bins) + 0.5) / BINS_PER_DECADE))


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
    lat_rows = []
    for (b, typ), bins in sorted(hist.items()):
        lat_rows.append(
            {
                "t_ns": t0_ns + b * width,
                "type": typ,
                "n": sum(bins.values()),
                **{f"p{round(q * 100)}_ms": quantile_of_bins(bins, q) / 1e6 for q in QUANTILES},
            }
        )
    open_rows = []
    level = 0
    last = max((b for b in change if b * width < t1_ns - t0_ns), default=-1)
    for b in range(min(change, default=0), last + 1):
        level += change.get(b, 0)
        open_rows.append({"t_ns": t0_ns + b * width, "open": level})
    return {
        "t0_ns": t0_ns,
        "bucket_s": bucket_s,
        "latency": lat_rows,
        "open_txns": open_rows,
    }
