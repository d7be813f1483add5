"""Ordering: (a) non-monotonic poll — within one epoch (no assign, revoke or seek in between) a
consumer was returned an offset not above the previous offset it got in that partition;
(b) skipped offset — within one epoch a consumer's reads of a partition passed over an offset
known to hold a committed record (acked by a committed transaction or returned to any
read_committed reader) without returning it; (c) producer order — two writes of one producer to
one partition, both committed, whose acked offsets are in the opposite order to the writes.
Counts: (a) offending reads; (b) committed records skipped; (c) offending write pairs."""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from ..projections import COMMITTED
from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "ordering"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), ("non_monotonic", "skipped", "producer_order"))
    proj = ctx.proj
    if ctx.has_reads:
        r = proj.reads.filter(
            (F.col("prev_epoch") == F.col("epoch")) & (F.col("offset") <= F.col("prev_offset"))
        )
        out.frames.append(
            anomalies(
                r,
                NAME,
                "non_monotonic",
                F.col("t"),
                {
                    "consumer": F.col("process"),
                    "topic": F.col("topic"),
                    "partition": F.col("partition"),
                    "previous": F.struct(
                        F.col("prev_offset").alias("offset"),
                        F.col("prev_value").alias("value"),
                        F.col("prev_t").alias("t"),
                    ),
                    "then": F.struct("offset", "value", "t", "op_id"),
                },
            )
        )
        s = proj.spans
        ra = proj.ranks.select(
            F.col("topic").alias("ta"),
            F.col("partition").alias("pa"),
            F.col("offset").alias("oa"),
            F.col("rank").alias("rank_a"),
        )
        rb = proj.ranks.select(
            F.col("topic").alias("tb"),
            F.col("partition").alias("pb"),
            F.col("offset").alias("ob"),
            F.col("rank").alias("rank_b"),
        )
        j = s.join(
            ra,
            (s["topic"] == ra["ta"])
            & (s["partition"] == ra["pa"])
            & (s["first_offset"] == ra["oa"]),
        ).join(
            rb,
            (s["topic"] == rb["tb"])
            & (s["partition"] == rb["pb"])
            & (s["last_offset"] == rb["ob"]),
        )
        skipped = F.col("rank_b") - F.col("rank_a") + 1 - F.col("n_read")
        j = j.withColumn("skipped", skipped).filter(F.col("skipped") > 0)
        out.frames.append(
            anomalies(
                j,
                NAME,
                "skipped",
                F.col("first_t"),
                {
                    "consumer": F.col("process"),
                    "topic": F.col("topic"),
                    "partition": F.col("partition"),
                    "read_from_offset": F.col("first_offset"),
                    "read_to_offset": F.col("last_offset"),
                    "records_returned": F.col("n_read"),
                    "committed_records_in_range": F.col("rank_b") - F.col("rank_a") + 1,
                    "skipped": F.col("skipped"),
                    "between_ns": F.array(F.col("first_t"), F.col("last_t")),
                },
                weight=F.col("skipped"),
            )
        )
    w = proj.located.filter(
        (F.col("role") == "w") & (F.col("status") == COMMITTED) & F.col("offset").isNotNull()
    )
    win = Window.partitionBy("process", "topic", "partition").orderBy("op_id")
    w = w.select(
        "process",
        "topic",
        "partition",
        "op_id",
        "offset",
        "value",
        "t",
        F.lag("offset").over(win).alias("prev_offset"),
        F.lag("value").over(win).alias("prev_value"),
        F.lag("op_id").over(win).alias("prev_op_id"),
    ).filter(F.col("offset") < F.col("prev_offset"))
    out.frames.append(
        anomalies(
            w,
            NAME,
            "producer_order",
            F.col("t"),
            {
                "producer": F.col("process"),
                "topic": F.col("topic"),
                "partition": F.col("partition"),
                "earlier_write": F.struct(
                    F.col("prev_op_id").alias("op_id"),
                    F.col("prev_value").alias("value"),
                    F.col("prev_offset").alias("offset"),
                ),
                "later_write": F.struct("op_id", "value", "offset"),
            },
        )
    )
    return out
