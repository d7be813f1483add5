"""The first, cheap pass over a history (one Spark job, two scans): the per-second op timeline,
the processes' restarts, and the dictionaries the checkers' numeric keys are built from.

The checkers aggregate on numbers wherever they can: Spark can only run a hash aggregation when
every aggregation buffer is fixed-width, so a ``max(struct(process, ...))`` or ``min(string)``
costs a sort of all the rows.  Processes and topics are therefore replaced by their rank in
sorted order (``proc_rank``; ``tp_key = topic_rank << 16 | partition``): ranks order exactly
like the names, so "the greatest (process, op_id)" or "the least (topic, partition, offset)"
become the greatest or least of one packed 64-bit number (``rank << OP_BITS | op_id``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...rundir.run_dir import RunDirError
from ...rundir.schema import EventType
from ..summary_rows import SEC, Summary, summary_of_rows
from .packed_keys import OP_BITS, PARTITION_BITS, PROC_BITS, TOPIC_BITS, name_key

__all__ = ["Summary", "summarize"]


def summarize(h: DataFrame) -> Summary:
    """Run the summary job over history ``h``.  Raises RunDirError for a history the packed
    keys cannot hold (negative or >= 2**40 op ids and offsets; 2**22 processes; 2**7 topics;
    partitions >= 2**16)."""
    first = F.col("item").isNull() | (F.col("item") == 0)
    lat = F.when(first, F.col("complete_ns") - F.col("invoke_ns"))
    is_start = F.col("type") == F.lit(EventType.START.value)
    timeline = h.groupBy(
        F.floor(F.col("invoke_ns") / SEC).alias("sec"),
        "type",
        "outcome",
        # start ops are few: each one stays its own group, so it comes back by name
        F.when(is_start, F.col("process")).alias("process"),
        F.when(is_start, F.col("op_id")).alias("op_id"),
    ).agg(
        F.sum(first.cast("long")).alias("ops"),
        F.count(F.lit(1)).alias("rows"),
        F.sum(lat).alias("lat_sum"),
        F.count(lat).alias("lat_n"),
        F.max(lat).alias("lat_max"),
    )
    # processes x partitions x producer ids: a few hundred groups, from one scan
    send = (F.col("type") == F.lit(EventType.SEND.value)) & F.col("producer_id").isNotNull()
    combos = h.groupBy(
        "process",
        "topic",
        "partition",
        F.when(send, F.col("producer_id")).alias("pid"),
    ).agg(
        F.min("op_id").alias("min_op"),
        F.max("op_id").alias("max_op"),
        F.min("offset").alias("min_off"),
        F.max("offset").alias("max_off"),
        F.max(send & (F.col("outcome") == "ok")).alias("acked"),
    )
    n = F.lit(None).cast("long")
    s = F.lit(None).cast("string")
    rows = (
        timeline.select(
            F.lit("T").alias("tag"),
            "sec",
            "type",
            "outcome",
            "process",
            "op_id",
            "ops",
            "rows",
            "lat_sum",
            "lat_n",
            "lat_max",
            F.lit(None).cast("string").alias("topic"),
            F.lit(None).cast("int").alias("partition"),
            n.alias("pid"),
            n.alias("min_off"),
            n.alias("max_off"),
            F.lit(None).cast("boolean").alias("acked"),
            n.alias("process_key"),
            n.alias("topic_key"),
        )
        .unionByName(
            combos.select(
                F.lit("C").alias("tag"),
                n.alias("sec"),
                s.alias("type"),
                s.alias("outcome"),
                "process",
                F.col("max_op").alias("op_id"),
                F.col("min_op").alias("ops"),
                n.alias("rows"),
                n.alias("lat_sum"),
                n.alias("lat_n"),
                n.alias("lat_max"),
                "topic",
                "partition",
                "pid",
                "min_off",
                "max_off",
                "acked",
                name_key(F.col("process")).alias("process_key"),
                name_key(F.col("topic")).alias("topic_key"),
            )
        )
        .collect()
    )
    return _build(rows)


def _build(rows: list[Any]) -> Summary:
    summary, x = summary_of_rows(rows)
    _limit(x.lo_op >= 0 and x.lo_off >= 0, f"negative op_id or offset ({x.lo_op}, {x.lo_off})")
    _limit(x.hi_op < 1 << OP_BITS, f"op_id {x.hi_op} >= 2**{OP_BITS}")
    _limit(x.hi_off < 1 << OP_BITS, f"offset {x.hi_off} >= 2**{OP_BITS}")
    _limit(len(summary.processes) < 1 << PROC_BITS, f"{len(summary.processes)} processes")
    topics = summary.topics
    _limit(len(topics) < 1 << TOPIC_BITS, f"{len(topics)} topics (limit {1 << TOPIC_BITS})")
    _limit(
        all(0 <= p < 1 << PARTITION_BITS for _, p in summary.partitions),
        f"a partition number outside [0, 2**{PARTITION_BITS})",
    )
    return summary


def _limit(ok: bool, what: str) -> None:
    if not ok:
        raise RunDirError(f"the history is outside what the analysis can hold: {what}")
