"""The Spark implementation of rules/consume_transform_produce.py (whose docstring is the
definition): outputs are matched to inputs by a 128-bit hash of (group, source)
(projections.output_key) rather than by the strings themselves, and places are packed into
longs (packed_keys.py): the committed positions per group and partition, the final read's inputs
at their least place, and their outputs' counts."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ....rundir.schema import EventType
from ...rules import consume_transform_produce
from ..packed_keys import op_key
from ..projections import COMMITTED, OUTPUT_KEYS, output_key, place_offset, place_tp
from .base import LATER, CheckOutput, Exact, Refine, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = consume_transform_produce
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES})


def _outputs(proj: Any, sources: list[str]) -> DataFrame:
    """(value, o_group, o_source) of the output records in the final read whose source is one
    of ``sources`` (for the examples' evidence): values whose greatest write (the one
    ``values`` keeps) names a source.  A value's source and group are not kept per value (they
    are strings): they come from that write in the history."""
    h = proj.h
    cond = (
        (F.col("type") == EventType.SEND.value)
        & F.col("value").isNotNull()
        & F.col("source").isin(sources)
    )
    sends = h.filter(cond).select("value", "process", "op_id", "group_id", "source")
    sends = proj.with_ranks(sends, tp=False).select(
        "value",
        op_key(F.col("_proc_rank"), F.col("op_id")).alias("write_key"),
        F.col("group_id").alias("o_group"),
        F.col("source").alias("o_source"),
    )
    v = proj.values.filter(F.col("n_final_reads") > 0).select("value", "write_key")
    # a hash join building on the sends: the values (cached, partitioned by value) are not sorted
    return v.join(sends.hint("shuffle_hash"), ["value", "write_key"]).select(
        "value", "o_group", "o_source"
    )


def _input_values(proj: Any, examples: list[dict[str, Any]]) -> None:
    """Put each example's input value in its evidence: the finally read value at the input's
    place whose output key under the example's group is the one the anomaly row carries
    (``_input``: the place and the key's first hash, in place of the value string)."""
    groups = sorted({e["evidence"]["group"] for e in examples})
    keys = [output_key(F.lit(g), F.col("value"))[0].alias(f"_k{i}") for i, g in enumerate(groups)]
    places = sorted({e["evidence"]["_input"]["place"] for e in examples})
    hits = (
        proj.values.filter((F.col("n_final_reads") > 0) & F.col("least_place").isin(places))
        .select("least_place", "value", *keys)
        .collect()
    )
    for e in examples:
        ev = e["evidence"]
        ref = ev.pop("_input")
        col = f"_k{groups.index(ev['group'])}"
        value = next(
            (r["value"] for r in hits if r["least_place"] == ref["place"] and r[col] == ref["k1"]),
            None,
        )
        ev["input"] = {"value": value, **ev["input"]}


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    _input_values(ctx.proj, examples)
    pairs = {(e["evidence"]["group"], e["evidence"]["input"]["value"]) for e in examples}
    rows = _outputs(ctx.proj, sorted({src for _, src in pairs if src is not None})).collect()
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
        KINDS,
        refine=Refine(_needs, _apply),
    )
    if not ctx.type_counts.get(EventType.SEND_OFFSETS.value):
        out.unknown = "no consume-transform-produce copier in this run (no send_offsets)"
        return out
    if not ctx.has_final_read:
        out.unknown = "no final read: the visible outputs are unknown"
        return out
    proj = ctx.proj
    positions = _committed_positions(proj)
    if not positions:
        out.notes.append("no send_offsets in a committed transaction: no input records to check")
    groups = sorted({g for g, _, _ in positions})
    # per (group, input partition): the group's committed position there; ``first`` marks one
    # group per partition, whose row also carries the partition's outputs (below)
    rows, seen = [], set()
    for g, tp_k, pos in sorted(positions, key=lambda x: (x[1], x[0])):
        rows.append((groups.index(g), g, tp_k, pos, tp_k not in seen))
        seen.add(tp_k)
    table = proj.h.sparkSession.createDataFrame(
        rows, "g_idx int, g string, g_tp long, committed_pos long, first boolean"
    )
    # one pass over the finally read values: each is an output (its greatest write's key) and,
    # for each group that consumed its partition, an input (its key under that group); the two
    # kinds meet by key in one aggregation of numbers (no value string is shuffled or compared)
    v = proj.values.filter(F.col("n_final_reads") > 0).select(
        "value", "least_place", "first_read_ns", *OUTPUT_KEYS
    )
    j = v.join(F.broadcast(table), place_tp(F.col("least_place")) == F.col("g_tp"), "left")
    k1, k2 = OUTPUT_KEYS
    i_k1, i_k2 = output_key(F.col("g"), F.col("value"))
    n = F.lit(None)
    as_output = F.when(
        F.col(k1).isNotNull() & (F.col("g").isNull() | F.col("first")),
        F.struct(
            F.col(k1).alias("k1"),
            F.col(k2).alias("k2"),
            F.lit(1).alias("out"),
            n.cast("int").alias("g_idx"),
            n.cast("long").alias("place"),
            n.cast("long").alias("committed_pos"),
            n.cast("long").alias("t"),
        ),
    )
    as_input = F.when(
        F.col("g").isNotNull(),
        F.struct(
            i_k1.alias("k1"),
            i_k2.alias("k2"),
            F.lit(0).alias("out"),
            "g_idx",
            F.col("least_place").alias("place"),
            "committed_pos",
            F.col("first_read_ns").alias("t"),
        ),
    )
    e = j.select(F.explode(F.array_compact(F.array(as_output, as_input))).alias("e")).select("e.*")
    agg = e.groupBy("k1", "k2").agg(
        F.sum("out").alias("n_out"),
        F.max("g_idx").alias("g_idx"),
        F.max("place").alias("place"),
        F.max("committed_pos").alias("committed_pos"),
        F.max("t").alias("t"),
    )
    # an input of one group is one key: its row carries the input's fields
    agg = agg.filter(F.col("place").isNotNull())
    offset = place_offset(F.col("place"))
    tp = place_tp(F.col("place"))
    names = F.array(*(F.lit(g) for g in groups)) if groups else F.array(F.lit(None))
    ev = {
        "group": F.element_at(names, F.col("g_idx") + 1),
        "input": F.struct(
            proj.tp_topic(tp).alias("topic"),
            proj.tp_partition(tp).alias("partition"),
            offset.alias("offset"),
        ),
        "group_committed_position": F.col("committed_pos"),
        "outputs_in_final_read": F.col("n_out"),
        "outputs_first_last": F.lit(LATER),
        "_input": F.struct("place", "k1"),
    }
    below = offset < F.col("committed_pos")
    conditions = {
        "missing_output": below & (F.col("n_out") == 0),
        "duplicate_output": F.col("n_out") > 1,
        "output_ahead_of_offsets": ~below & (F.col("n_out") > 0),
    }
    # one frame for the three kinds (a row can be two: a duplicate output ahead of the
    # offsets), so the aggregation above runs once, not once per kind
    kinds = F.array_compact(F.array(*(F.when(c, F.lit(k)) for k, c in conditions.items())))
    agg = agg.select("*", kinds.alias("_kinds")).filter(F.size("_kinds") > 0)
    agg = agg.select("*", F.explode("_kinds").alias("_kind"))
    out.frames.append(anomalies(agg, NAME, F.col("_kind"), F.col("t"), ev))
    return out


def _committed_positions(proj: Any) -> list[tuple[str, int, int]]:
    """(group, tp key, committed position): per copier group and input partition, the highest
    offset sent with send_offsets in a committed transaction (a few rows)."""
    h = proj.h
    so = h.filter((F.col("type") == EventType.SEND_OFFSETS.value) & F.col("topic").isNotNull())
    t = proj.txns.filter(F.col("status") == COMMITTED).select("t_writer", "t_txn")
    so = so.join(F.broadcast(t), (so["process"] == t["t_writer"]) & (so["txn"] == t["t_txn"]))
    # a topic the history has no partition of has no rank, and no place of it is read
    so = so.filter(F.col("topic").isin(proj.topic_names))
    pos = (
        so.groupBy(F.col("group_id").alias("g"), "topic", "partition")
        .agg(F.max("offset").alias("committed_pos"))
        .select("g", proj.tp_key(F.col("topic"), F.col("partition")).alias("tp"), "committed_pos")
    )
    return [
        (r["g"], r["tp"], r["committed_pos"])
        for r in pos.collect()
        if r["g"] is not None and r["tp"] is not None and r["committed_pos"] is not None
    ]
