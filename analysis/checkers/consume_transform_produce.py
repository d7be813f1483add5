"""Consume-transform-produce: for each copier group (producers that call
send_offsets_to_transaction), every input record visible in the final read and below the
group's committed position (the highest offset sent with send_offsets in a committed
transaction) has exactly one output record (a write whose ``source`` is that input's value) in
the final read; input records at or above the committed position have none (outputs and
offsets commit atomically). Counts: missing outputs, duplicated outputs (inputs with more than
one), outputs ahead of the committed offsets.  (Outputs are matched to inputs by a 128-bit hash
of (group, source), see projections.output_key.)"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..projections import COMMITTED, OUTPUT_KEYS, output_key, place_offset, place_tp
from ..summary import OP_BITS
from .base import LATER, CheckOutput, Exact, Refine, anomalies, definition
from .context import CheckContext

NAME = "consume_transform_produce"


def _outputs(proj: Any, sources: list[str]) -> DataFrame:
    """(value, o_group, o_source) of the output records in the final read whose source is one
    of ``sources`` (for the examples' evidence): values whose greatest write (the one
    ``values`` keeps) names a source.  A value's source and group are not kept per value (they
    are strings): they come from that write in the history."""
    h = proj.h
    cond = (F.col("type") == "send") & F.col("value").isNotNull() & F.col("source").isin(sources)
    sends = h.filter(cond).select("value", "process", "op_id", "group_id", "source")
    sends = proj.with_ranks(sends, tp=False).select(
        "value",
        (F.shiftleft(F.col("_proc_rank").cast("long"), OP_BITS) + F.col("op_id")).alias("wkey"),
        F.col("group_id").alias("o_group"),
        F.col("source").alias("o_source"),
    )
    v = proj.values.filter(F.col("n_final") > 0).select("value", "wkey")
    # a hash join building on the sends: the values (cached, partitioned by value) are not sorted
    return v.join(sends.hint("shuffle_hash"), ["value", "wkey"]).select(
        "value", "o_group", "o_source"
    )


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    pairs = {(e["evidence"]["group"], e["evidence"]["input"]["value"]) for e in examples}
    rows = _outputs(ctx.proj, sorted({src for _, src in pairs})).collect()
    by_key: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        by_key.setdefault((r["o_group"], r["o_source"]), []).append(r["value"])
    for e in examples:
        ev = e["evidence"]
        ev["_outputs"] = sorted(by_key.get((ev["group"], ev["input"]["value"]), []))
    return {r["value"] for r in rows}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    outs = [{"value": v, "loc_min": exact.value(v, "loc_min")} for v in ev.pop("_outputs", [])]
    for o in outs:
        if o["loc_min"] is None:
            del o["loc_min"]
    # min and max of struct(value, loc_min): by value (values are unique)
    ev["outputs_first_last"] = [outs[0], outs[-1]] if outs else [None, None]


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(
        NAME,
        definition(__doc__),
        ("missing_output", "duplicate_output", "output_ahead_of_offsets"),
        refine=Refine(_needs, _apply),
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
    pos = (
        so.groupBy(F.col("group_id").alias("g"), "topic", "partition")
        .agg(F.max("offset").alias("committed_pos"))
        .select("g", proj.tp_key(F.col("topic"), F.col("partition")).alias("g_tp"), "committed_pos")
    )
    v = proj.values.filter(F.col("n_final") > 0)
    # outputs in the final read per (group, input value), keyed by the pair of hashes each
    # value's greatest write carries (values: out_k1, out_k2)
    k1, k2 = OUTPUT_KEYS
    outputs = (
        v.filter(F.col(k1).isNotNull())
        .groupBy(F.col(k1).alias("o_k1"), F.col(k2).alias("o_k2"))
        .agg(F.count(F.lit(1)).alias("n_out"))
    )
    i_k1, i_k2 = output_key(F.col("g"), F.col("value"))
    inputs = v.join(F.broadcast(pos), place_tp(F.col("pmin")) == F.col("g_tp")).select(
        "g",
        "value",
        F.col("g_tp").alias("tp"),
        place_offset(F.col("pmin")).alias("offset"),
        "committed_pos",
        F.col("fr_t").alias("t"),
        i_k1.alias("i_k1"),
        i_k2.alias("i_k2"),
    )
    j = inputs.join(
        outputs.hint("shuffle_hash"),
        (inputs["i_k1"] == outputs["o_k1"]) & (inputs["i_k2"] == outputs["o_k2"]),
        "left",
    ).withColumn("n_out", F.coalesce("n_out", F.lit(0)))
    ev = {
        "group": F.col("g"),
        "input": F.struct(
            "value",
            proj.tp_topic(F.col("tp")).alias("topic"),
            proj.tp_partition(F.col("tp")).alias("partition"),
            "offset",
        ),
        "group_committed_position": F.col("committed_pos"),
        "outputs_in_final_read": F.col("n_out"),
        "outputs_first_last": F.lit(LATER),
    }
    below = F.col("offset") < F.col("committed_pos")
    conditions = {
        "missing_output": below & (F.col("n_out") == 0),
        "duplicate_output": F.col("n_out") > 1,
        "output_ahead_of_offsets": ~below & (F.col("n_out") > 0),
    }
    # one frame for the three kinds (a row can be two: a duplicate output ahead of the
    # offsets), so the join above runs once, not once per kind
    kinds = F.array_compact(F.array(*(F.when(c, F.lit(k)) for k, c in conditions.items())))
    j = j.select("*", kinds.alias("_kinds")).filter(F.size("_kinds") > 0)
    j = j.select("*", F.explode("_kinds").alias("_kind"))
    out.frames.append(anomalies(j, NAME, F.col("_kind"), F.col("t"), ev))
    return out
