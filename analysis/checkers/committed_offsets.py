"""Committed offsets: after heal and quiescence, each copier group's committed offset for each
input partition is the one the history says was committed last: the offset sent with
send_offsets in the committed transaction whose commit completed last, or one sent by a
transaction whose commit outcome is unknown and was invoked after that commit; with no
committed transaction, no offset or such an unknown one. A different final offset means the
group coordinator lost a committed offset (e.g. pending transactional offsets forgotten across
a restart) or applied one that was never committed (e.g. an aborted transaction's). Groups
that also commit offsets outside transactions are not judged. Needs the groups' offsets in
final_state.json. Count: partitions."""

from __future__ import annotations

from pyspark.sql import functions as F

from ...harness.history.schema import EventType
from ..reference.group_offsets import SentOffset, judge_offsets
from .base import CheckOutput, definition
from .context import CheckContext
from .protocol import Reads

NAME = "committed_offsets"
KINDS: tuple[str, ...] = ("committed_offset_mismatch",)
READS = frozenset({Reads.TRANSACTIONS, Reads.FINAL_STATE})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), KINDS)
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
