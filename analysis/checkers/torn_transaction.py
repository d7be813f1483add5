"""Torn transaction: a read_committed reader, within one epoch (no rewind point), read past a
committed transaction's records in a partition — its reads of that partition began at or
before the transaction's first record there and reached its last — and returned some but not
all of them. A transaction's records in a partition are its acknowledged (non-failed) writes
there, placed at their read or acked offsets. Count: distinct (reader, transaction, partition,
epoch)."""

from __future__ import annotations

from pyspark.sql import functions as F

from ..projections import COMMITTED
from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "torn_transaction"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), ("torn_transaction",))
    if not ctx.has_reads:
        out.unknown = "no read_committed reads in the history"
        return out
    proj = ctx.proj
    expected = (
        proj.values.filter(
            (F.col("status") == COMMITTED)
            & F.col("vtxn").isNotNull()
            & (F.col("n_w") > 0)
            & (F.col("wr.outcome") != "fail")
        )
        .groupBy(
            F.col("writer").alias("x_writer"),
            F.col("vtxn").alias("x_txn"),
            F.coalesce("loc_min.topic", "wr.topic").alias("x_topic"),
            F.coalesce("loc_min.partition", "wr.partition").alias("x_partition"),
        )
        .agg(
            F.count(F.lit(1)).alias("expected"),
            F.min("loc_min.offset").alias("txn_first"),
            F.max("loc_min.offset").alias("txn_last"),
            F.count("loc_min.offset").alias("located"),
        )
        .filter((F.col("expected") > 1) & (F.col("located") == F.col("expected")))
    )
    seen = (
        proj.reads.filter(F.col("vtxn").isNotNull())
        .groupBy("process", "topic", "partition", "epoch", "writer", "vtxn")
        .agg(
            F.count(F.lit(1)).alias("seen"),
            F.min(F.struct("offset", "value", "t")).alias("first_returned"),
            F.max(F.struct("offset", "value", "t")).alias("last_returned"),
        )
    )
    j = seen.join(
        expected,
        (seen["writer"] == expected["x_writer"])
        & (seen["vtxn"] == expected["x_txn"])
        & (seen["topic"] == expected["x_topic"])
        & (seen["partition"] == expected["x_partition"]),
    ).filter(F.col("seen") < F.col("expected"))
    sp = proj.spans.select(
        F.col("process").alias("s_process"),
        F.col("topic").alias("s_topic"),
        F.col("partition").alias("s_partition"),
        F.col("epoch").alias("s_epoch"),
        "first_offset",
        "last_offset",
    )
    j = j.join(
        sp,
        (j["process"] == sp["s_process"])
        & (j["topic"] == sp["s_topic"])
        & (j["partition"] == sp["s_partition"])
        & (j["epoch"] == sp["s_epoch"]),
    ).filter(
        (F.col("first_offset") <= F.col("txn_first")) & (F.col("last_offset") >= F.col("txn_last"))
    )
    out.frames.append(
        anomalies(
            j,
            NAME,
            "torn_transaction",
            F.col("first_returned.t"),
            {
                "reader": F.col("process"),
                "transaction": F.struct(F.col("writer"), F.col("vtxn").alias("txn")),
                "topic": F.col("topic"),
                "partition": F.col("partition"),
                "records_in_partition": F.col("expected"),
                "records_returned": F.col("seen"),
                "txn_offsets": F.array(F.col("txn_first"), F.col("txn_last")),
                "reader_span": F.array(F.col("first_offset"), F.col("last_offset")),
                "returned_first_last": F.array(F.col("first_returned"), F.col("last_returned")),
            },
        )
    )
    return out
