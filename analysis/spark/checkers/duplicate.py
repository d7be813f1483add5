"""The Spark implementation of rules/duplicate.py (whose docstring is the definition):
(a) values with more than one place in the per-value projection; (b)
repeated returns within a (consumer, partition, epoch) of the stream projection."""

from __future__ import annotations

from pyspark.sql import functions as F

from ...rules import duplicate
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = duplicate
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES, Reads.STREAM, Reads.SPANS})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    if not ctx.has_reads:
        out.unknown = "no reads in the history"
        return out
    proj = ctx.proj
    # values keeps greatest_place only where it is another place than least_place
    v = proj.values.filter(F.col("greatest_place").isNotNull())
    out.frames.append(
        anomalies(
            v,
            NAME,
            "multiple_offsets",
            F.least(F.col("least_place_obs_ns"), F.col("greatest_place_obs_ns")),
            {
                "value": F.col("value"),
                "seen_at": F.array(
                    proj.place_struct(
                        F.col("least_place"), F.col("least_place_obs"), F.col("least_place_obs_ns")
                    ),
                    proj.place_struct(
                        F.col("greatest_place"),
                        F.col("greatest_place_obs"),
                        F.col("greatest_place_obs_ns"),
                    ),
                ),
            },
        )
    )
    # A value returned twice in one epoch was returned either at one offset twice (then the
    # epoch's offsets did not strictly increase: the span is "backwards") or at two offsets
    # (then the value has two places: a multiple_offsets duplicate).  Only those reads are
    # counted.
    back = F.broadcast(proj.spans.filter(F.col("backwards")).select("stream", "epoch"))
    dup_values = F.broadcast(v.select("value"))
    reads = proj.reads.join(back, ["stream", "epoch"], "left_semi").unionByName(
        proj.reads.join(back, ["stream", "epoch"], "left_anti").join(
            dup_values, "value", "left_semi"
        )
    )
    key = ["stream", "epoch", "value"]
    r = (
        reads.groupBy(*key, "proc_rank", "tp")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min(F.struct("t", "op_id", "offset")).alias("first_return"),
            F.max(F.struct("t", "op_id", "offset")).alias("last_return"),
        )
        .filter(F.col("n") > 1)
    )
    out.frames.append(
        anomalies(
            r,
            NAME,
            "redelivered",
            F.col("last_return.t"),
            {
                "consumer": proj.proc_name(F.col("proc_rank")),
                "topic": proj.tp_topic(F.col("tp")),
                "partition": proj.tp_partition(F.col("tp")),
                "value": F.col("value"),
                "times_returned": F.col("n"),
                "returns": F.array(F.col("first_return"), F.col("last_return")),
                "note": F.lit("no assign/revoke/seek/restart between these polls"),
            },
        )
    )
    return out
