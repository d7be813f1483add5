"""The Spark implementation of rules/committed_offsets.py (whose docstring is the definition):
the offsets each transaction sent (greatest per partition) joined with the transactions'
statuses in Spark, then judged in the driver by the rule's own :func:`judge_offsets` over these
few facts and the final state."""

from __future__ import annotations

from pyspark.sql import functions as F

from ....rundir.schema import EventType
from ...rules import committed_offsets
from ...rules.committed_offsets import SentOffset, judge_offsets
from .base import CheckOutput
from .context import CheckContext
from .protocol import Reads

RULE = committed_offsets
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.TRANSACTIONS, Reads.FINAL_STATE})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    h = ctx.data.history
    plain = {
        r["group_id"]
        for r in h.filter(
            (F.col("type") == EventType.COMMIT_OFFSETS.value) & F.col("group_id").isNotNull()
        )
        .select("group_id")
        .distinct()
        .collect()
    }
    sent = (
        h.filter(
            (F.col("type") == EventType.SEND_OFFSETS.value)
            & F.col("txn").isNotNull()
            & F.col("group_id").isNotNull()
            & F.col("topic").isNotNull()
            & F.col("partition").isNotNull()
            & F.col("offset").isNotNull()
        )
        .groupBy(
            F.col("process").alias("t_writer"),
            F.col("txn").alias("t_txn"),
            "group_id",
            "topic",
            "partition",
        )
        .agg(F.max("offset").alias("offset"))
        .join(ctx.proj.txns, ["t_writer", "t_txn"])
        .select(
            "group_id",
            "topic",
            "partition",
            "offset",
            "t_writer",
            "t_txn",
            "status",
            "commit_invoke_ns",
            "end_ns",
        )
        .collect()
    )
    rows, unknown, checked = judge_offsets(
        (
            SentOffset(
                r["group_id"],
                r["topic"],
                r["partition"],
                r["offset"],
                r["t_writer"],
                r["t_txn"],
                r["status"],
                r["commit_invoke_ns"],
                r["end_ns"],
            )
            for r in sent
        ),
        plain,
        ctx.data.final_state,
    )
    if unknown is not None:
        out.unknown = unknown
        return out
    out.rows.extend(rows)
    out.checked["partitions"] = checked
    return out
