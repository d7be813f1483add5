"""Consume-transform-produce: for each copier group (producers that call
send_offsets_to_transaction), every input record visible in the final read and below the
group's committed position (the highest offset sent with send_offsets in a committed
transaction) has exactly one output record (a write whose ``source`` is that input's value) in
the final read; input records at or above the committed position have none (outputs and
offsets commit atomically). Counts: missing outputs, duplicated outputs (inputs with more than
one), outputs ahead of the committed offsets."""

from __future__ import annotations

from pyspark.sql import functions as F

from ..projections import COMMITTED
from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "consume_transform_produce"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(
        NAME, definition(__doc__), ("missing_output", "duplicate_output", "output_ahead_of_offsets")
    )
    if not ctx.type_counts.get("send_offsets"):
        out.unknown = "no consume-transform-produce copier in this run (no send_offsets)"
        return out
    if not ctx.has_final_read:
        out.unknown = "no final read: the visible outputs are unknown"
        return out
    proj = ctx.proj
    h = proj.h
    so = h.filter((F.col("type") == "send_offsets") & F.col("topic").isNotNull())
    t = proj.txns.filter(F.col("status") == COMMITTED).select("t_writer", "t_txn")
    so = so.join(F.broadcast(t), (so["process"] == t["t_writer"]) & (so["txn"] == t["t_txn"]))
    pos = so.groupBy(
        F.col("group_id").alias("g"),
        F.col("topic").alias("g_topic"),
        F.col("partition").alias("g_part"),
    ).agg(F.max("offset").alias("committed_pos"))
    v = proj.values.filter(F.col("n_final") > 0)
    outputs = (
        v.filter(F.col("wr.source").isNotNull())
        .groupBy(F.col("wr.group_id").alias("o_group"), F.col("wr.source").alias("o_source"))
        .agg(
            F.count(F.lit(1)).alias("n_out"),
            F.min(F.struct(F.col("value"), F.col("loc_min"))).alias("out_first"),
            F.max(F.struct(F.col("value"), F.col("loc_min"))).alias("out_last"),
        )
    )
    inputs = v.join(
        F.broadcast(pos),
        (v["loc_min.topic"] == pos["g_topic"]) & (v["loc_min.partition"] == pos["g_part"]),
    ).select(
        "g",
        "value",
        F.col("loc_min.topic").alias("topic"),
        F.col("loc_min.partition").alias("partition"),
        F.col("loc_min.offset").alias("offset"),
        "committed_pos",
        F.col("first_read.t").alias("t"),
    )
    j = inputs.join(
        outputs,
        (inputs["g"] == outputs["o_group"]) & (inputs["value"] == outputs["o_source"]),
        "left",
    ).withColumn("n_out", F.coalesce("n_out", F.lit(0)))
    ev = {
        "group": F.col("g"),
        "input": F.struct("value", "topic", "partition", "offset"),
        "group_committed_position": F.col("committed_pos"),
        "outputs_in_final_read": F.col("n_out"),
        "outputs_first_last": F.array(F.col("out_first"), F.col("out_last")),
    }
    below = F.col("offset") < F.col("committed_pos")
    out.frames.append(
        anomalies(j.filter(below & (F.col("n_out") == 0)), NAME, "missing_output", F.col("t"), ev)
    )
    out.frames.append(
        anomalies(j.filter(F.col("n_out") > 1), NAME, "duplicate_output", F.col("t"), ev)
    )
    out.frames.append(
        anomalies(
            j.filter(~below & (F.col("n_out") > 0)), NAME, "output_ahead_of_offsets", F.col("t"), ev
        )
    )
    return out
