"""The Spark implementation of rules/unwritten_read.py (whose docstring is the definition):
the history's writes (sends and probes) and reads, grouped by record value in one shuffle;
each read classified against its value's writes (few per value), and the offending reads
grouped by (value, kind)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from ....rundir.schema import EventType
from ...rules import unwritten_read
from .base import OP_ITEM, READ_EVIDENCE, CheckOutput, anomalies, fields_of
from .context import CheckContext
from .protocol import Reads

RULE = unwritten_read
NAME, KINDS = RULE.NAME, RULE.KINDS
READS: frozenset[Reads] = frozenset({Reads.VALUES})

_WRITES = [t.value for t in unwritten_read.WRITE_TYPES]
_READS = [t.value for t in unwritten_read.READ_TYPES]


def _kind(w: Column, r: Column) -> Column:
    """The kind of read ``r`` given its value's writes ``w`` (an array): as rule.classify."""
    here = F.filter(
        w,
        lambda x: (
            (x["topic"] == r["topic"])
            & (x["partition"].isNull() | (x["partition"] == r["partition"]))
        ),
    )
    key_ok = F.exists(
        here,
        lambda x: x["key"].isNull() | r["key"].isNull() | (x["key"] == r["key"]),
    )
    return (
        F.when(F.size(w) == 0, F.lit("never_written"))
        .when(F.size(here) == 0, F.lit("wrong_partition"))
        .when(~key_ok, F.lit("wrong_key"))
    )


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    if not ctx.has_reads:
        out.unknown = unwritten_read.NO_READS
        return out
    h = ctx.data.history.filter(F.col("value").isNotNull() & F.col("type").isin(_WRITES + _READS))
    is_w = F.col("type").isin(_WRITES)
    write = F.struct(
        *OP_ITEM, F.when(F.col("type") != EventType.PROBE.value, F.col("key")).alias("key")
    )
    read = F.struct(F.coalesce("complete_ns", "invoke_ns").alias("t"), *OP_ITEM, "offset", "key")
    by_value = h.groupBy("value").agg(
        F.collect_list(F.when(is_w, write)).alias("w"),
        F.collect_list(F.when(~is_w, read)).alias("r"),
    )
    # a value read where no write put it: the common case (every read matched) leaves nothing
    reads = by_value.select("value", "w", F.explode("r").alias("r"))
    bad = reads.select("value", "w", "r", _kind(F.col("w"), F.col("r")).alias("kind")).filter(
        F.col("kind").isNotNull()
    )
    rows = bad.groupBy("value", "kind").agg(
        F.min("r").alias("first"),
        F.count(F.lit(1)).alias("n"),
        F.first(F.array_min("w")).alias("least"),
    )
    out.frames.append(
        anomalies(
            rows,
            NAME,
            F.col("kind"),
            F.col("first.t"),
            {
                "value": F.col("value"),
                "read": fields_of("first", (*READ_EVIDENCE, "key")),
                "times_read": F.col("n"),
                "written": F.when(
                    F.col("least").isNotNull(),
                    fields_of("least", ("process", "op_id", "type", "topic", "partition", "key")),
                ),
            },
        )
    )
    return out
