"""The Spark implementation of rules/ordering.py (whose docstring is the definition):
(a) a window over each consumer's stream per partition and epoch; (b) the
epoch spans (``proj.spans``) against the committed places; (c) each producer's committed writes
per partition in write order."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from ...rules import ordering
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = ordering
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.STREAM, Reads.SPANS, Reads.OFFSETS})
#: rows of the stream (projections.stream): a read, and a committed write
READ_ROW, COMMITTED_WRITE_ROW = 0, 1


def read_not_above_previous(
    row: Column, epoch: Column, offset: Column, prev: dict[str, Column]
) -> Column:
    """(a) non-monotonic: a read at or below the previous read of the same epoch (``prev``:
    the previous stream row of the same kind)."""
    return (row == READ_ROW) & (prev["epoch"] == epoch) & (offset <= prev["offset"])


def write_acked_below_previous(row: Column, offset: Column, prev: dict[str, Column]) -> Column:
    """(c) producer order: a committed write acked below the producer's previous committed
    write to the partition."""
    return (row == COMMITTED_WRITE_ROW) & (offset < prev["offset"])


def order_broken(row: Column, epoch: Column, offset: Column, prev: dict[str, Column]) -> Column:
    """Where the stream keeps ``prev`` (and keeps committed writes at all): (a) or (c)."""
    return read_not_above_previous(row, epoch, offset, prev) | write_acked_below_previous(
        row, offset, prev
    )


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    proj = ctx.proj
    if ctx.has_reads:
        # the stream keeps prev only where order_broken: reads not above the previous one
        r = proj.reads.filter(F.col("prev").isNotNull())
        out.frames.append(
            anomalies(
                r,
                NAME,
                "non_monotonic",
                F.col("t"),
                {
                    "consumer": proj.proc_name(F.col("proc_rank")),
                    "topic": proj.tp_topic(F.col("tp")),
                    "partition": proj.tp_partition(F.col("tp")),
                    "previous": F.struct(
                        F.col("prev.offset").alias("offset"),
                        F.col("prev.value").alias("value"),
                        F.col("prev.t").alias("t"),
                    ),
                    "then": F.struct("offset", "value", "t", "op_id"),
                },
            )
        )
        # committed records between a span's first and last offset: the difference of the two
        # offsets' ranks
        j = proj.span_skips.filter(F.col("skipped") > 0)
        out.frames.append(
            anomalies(
                j,
                NAME,
                "skipped",
                F.col("first_t"),
                {
                    "consumer": proj.proc_name(F.col("proc_rank")),
                    "topic": proj.tp_topic(F.col("tp")),
                    "partition": proj.tp_partition(F.col("tp")),
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
    # the stream keeps committed writes only where order_broken (acked below the previous one)
    w = proj.stream.filter(F.col("kind") == COMMITTED_WRITE_ROW)
    out.frames.append(
        anomalies(
            w,
            NAME,
            "producer_order",
            F.col("t"),
            {
                "producer": proj.proc_name(F.col("proc_rank")),
                "topic": proj.tp_topic(F.col("tp")),
                "partition": proj.tp_partition(F.col("tp")),
                "earlier_write": F.struct(
                    F.col("prev.op_id").alias("op_id"),
                    F.col("prev.value").alias("value"),
                    F.col("prev.offset").alias("offset"),
                ),
                "later_write": F.struct("op_id", "value", "offset"),
            },
        )
    )
    return out
