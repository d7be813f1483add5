"""Duplicate: (a) one value observed at more than one (topic, partition, offset) across acks and
reads — it was written to the log more than once; or (b) one value returned twice to one
consumer in one partition without a rewind point (assign, revoke, seek) between the two polls.
Counts: (a) distinct values; (b) distinct (consumer, partition, epoch, value)."""

from __future__ import annotations

from pyspark.sql import functions as F

from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "duplicate"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), ("multiple_offsets", "redelivered"))
    if not ctx.has_reads:
        out.unknown = "no reads in the history"
        return out
    v = ctx.proj.values.filter(
        (F.col("loc_min.topic") != F.col("loc_max.topic"))
        | (F.col("loc_min.partition") != F.col("loc_max.partition"))
        | (F.col("loc_min.offset") != F.col("loc_max.offset"))
    )
    out.frames.append(
        anomalies(
            v,
            NAME,
            "multiple_offsets",
            F.least(F.col("loc_min.t"), F.col("loc_max.t")),
            {"value": F.col("value"), "seen_at": F.array(F.col("loc_min"), F.col("loc_max"))},
        )
    )
    r = ctx.proj.reads.groupBy("process", "topic", "partition", "epoch", "value").agg(
        F.count(F.lit(1)).alias("n"),
        F.min(F.struct("t", "op_id", "offset")).alias("first_return"),
        F.max(F.struct("t", "op_id", "offset")).alias("last_return"),
    )
    r = r.filter(F.col("n") > 1)
    out.frames.append(
        anomalies(
            r,
            NAME,
            "redelivered",
            F.col("last_return.t"),
            {
                "consumer": F.col("process"),
                "topic": F.col("topic"),
                "partition": F.col("partition"),
                "value": F.col("value"),
                "times_returned": F.col("n"),
                "returns": F.array(F.col("first_return"), F.col("last_return")),
                "note": F.lit("no assign/revoke/seek between these polls"),
            },
        )
    )
    return out
