"""The Spark implementation of rules/torn_transaction.py (whose docstring is the definition):
the committed transactions' located records per partition, against
what each reader's epoch span returned of them (values parsed as ``writer|txn|index``)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...model.judged import NO_READS
from ...rules import torn_transaction
from ..projections import COMMITTED, FAIL_CODE, parse_value, place_offset, place_tp
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = torn_transaction
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES, Reads.OFFSETS, Reads.STREAM, Reads.SPANS})


def _candidates(proj: Any) -> DataFrame:
    """The (stream, epoch) spans that can hold a torn transaction.  A transaction torn in a span
    has an expected record at some offset o inside the span that the span did not return: if
    the span returned another value at o, o held two values (an inconsistent offset); if it
    returned nothing at o, o is a committed offset the span skipped.  So only spans with a
    skip, or with an inconsistent offset inside them, need the full count.  (The argument needs
    a write's transaction to be its value's; if a value not in writer|txn|index form has
    several writes, every span is checked.)"""
    spans = proj.span_skips
    bad = proj.offsets.filter(F.col("n_values") > 1).select(
        place_tp(F.col("place")).alias("b_tp"), place_offset(F.col("place")).alias("b_off")
    )
    holding = spans.join(
        F.broadcast(bad),
        (spans["tp"] == bad["b_tp"])
        & (spans["first_offset"] <= bad["b_off"])
        & (spans["last_offset"] >= bad["b_off"]),
        "left_semi",
    )
    irregular = proj.values.filter(~F.col("parsed") & (F.col("n_writes") > 1)).agg(
        (F.count(F.lit(1)) > 0).alias("irregular")
    )
    flagged = spans.filter(F.col("skipped") > 0).select("stream", "epoch")
    every = spans.crossJoin(F.broadcast(irregular)).filter(F.col("irregular"))
    return (
        flagged.unionByName(holding.select("stream", "epoch"))
        .unionByName(every.select("stream", "epoch"))
        .distinct()
    )


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    if not ctx.has_reads:
        out.unknown = NO_READS
        return out
    proj = ctx.proj
    # what each reader returned of a transaction, per epoch, in the candidate spans only:
    # distinct records, so that a record returned twice does not hide a missing one.  Those
    # reads are kept once joined: only they are parsed (a filter on the parsed transaction would
    # otherwise be pushed below the join and parse every read), and the candidates are found
    # once for the three uses below
    writer, txn, _ = parse_value(F.col("value"))
    reads = proj.keep(
        proj.reads.join(F.broadcast(_candidates(proj)), ["stream", "epoch"]).select(
            "*", writer.alias("writer"), txn.alias("value_txn")
        )
    ).filter(F.col("value_txn").isNotNull())
    key = ["stream", "epoch", "writer", "value_txn"]
    seen = reads.groupBy(*key, "proc_rank", "tp").agg(F.count_distinct("value").alias("seen"))
    # those transactions' records per partition (placed at their read or acked offset): values
    # that name their transaction, as the reads are attributed (a value in another form, taken
    # for its write's transaction, would be expected but never counted as seen)
    v = proj.values.join(
        F.broadcast(seen.select("writer", "value_txn").distinct()), ["writer", "value_txn"]
    ).filter(
        (F.col("status") == COMMITTED)
        & F.col("parsed")
        & F.col("value_txn").isNotNull()
        & (F.col("n_writes") > 0)
        & (F.col("write_outcome") != FAIL_CODE)
    )
    expected = (
        v.groupBy(
            F.col("writer").alias("x_writer"),
            F.col("value_txn").alias("x_txn"),
            F.coalesce(place_tp(F.col("least_place")), F.col("write_tp")).alias("x_tp"),
        )
        .agg(
            F.count(F.lit(1)).alias("expected"),
            F.min(place_offset(F.col("least_place"))).alias("txn_first"),
            F.max(place_offset(F.col("least_place"))).alias("txn_last"),
            F.count("least_place").alias("located"),
        )
        .filter((F.col("expected") > 1) & (F.col("located") == F.col("expected")))
    )
    j = seen.join(
        F.broadcast(expected),
        (seen["writer"] == expected["x_writer"])
        & (seen["value_txn"] == expected["x_txn"])
        & (seen["tp"] == expected["x_tp"]),
    ).filter(F.col("seen") < F.col("expected"))
    sp = F.broadcast(
        proj.spans.select(
            F.col("stream").alias("s_stream"),
            F.col("epoch").alias("s_epoch"),
            "first_offset",
            "last_offset",
        )
    )
    j = j.join(sp, (j["stream"] == sp["s_stream"]) & (j["epoch"] == sp["s_epoch"])).filter(
        (F.col("first_offset") <= F.col("txn_first")) & (F.col("last_offset") >= F.col("txn_last"))
    )
    # the first and last record returned
    ret = F.struct("offset", "value", "t")
    returned = reads.groupBy(*key).agg(
        F.min(ret).alias("first_returned"), F.max(ret).alias("last_returned")
    )
    j = j.join(returned, key)
    out.frames.append(
        anomalies(
            j,
            NAME,
            "torn_transaction",
            F.col("first_returned.t"),
            {
                "reader": proj.proc_name(F.col("proc_rank")),
                "transaction": F.struct(F.col("writer"), F.col("value_txn").alias("txn")),
                "topic": proj.tp_topic(F.col("tp")),
                "partition": proj.tp_partition(F.col("tp")),
                "records_in_partition": F.col("expected"),
                "records_returned": F.col("seen"),
                "txn_offsets": F.array(F.col("txn_first"), F.col("txn_last")),
                "reader_span": F.array(F.col("first_offset"), F.col("last_offset")),
                "returned_first_last": F.array(F.col("first_returned"), F.col("last_returned")),
            },
        )
    )
    return out
