"""The Spark implementation of rules/hanging_transactions.py (whose docstring is the definition):
rules (a)-(c) read the small final state in the driver, with the
rule's own functions; (d) cuts each partition's harness LSO samples into runs of one LSO with a
window over time, and judges the few long ones with the rule's allowance (lost requests, nodes
down)."""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from ....rundir.schema import MetricName
from ...rules import hanging_transactions
from ...rules.hanging_transactions import (
    final_state_rules,
    lost_request_recovery_ms,
    node_down_ns,
    stall_allowance_ms,
)
from .base import CheckOutput, row
from .context import CheckContext
from .protocol import Reads

RULE = hanging_transactions
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.FINAL_STATE, Reads.METRICS, Reads.FAULTS})


def _stalls(ctx: CheckContext, out: CheckOutput) -> bool:
    m = ctx.data.metrics
    if m is None:
        return False
    lso_n, hw_n = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value
    s = (
        m.filter(F.col("name").isin(lso_n, hw_n) & F.col("topic").isNotNull())
        .groupBy("topic", "partition", "time_ns")
        .agg(
            F.max(F.when(F.col("name") == lso_n, F.col("value"))).alias("lso"),
            F.max(F.when(F.col("name") == hw_n, F.col("value"))).alias("hw"),
        )
        .filter(F.col("lso").isNotNull() & F.col("hw").isNotNull())
    )
    w = Window.partitionBy("topic", "partition").orderBy("time_ns")
    s = s.withColumn(
        "changed", F.coalesce((F.lag("lso").over(w) != F.col("lso")).cast("int"), F.lit(1))
    ).withColumn("run", F.sum("changed").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    runs = s.groupBy("topic", "partition", "run").agg(
        F.min("time_ns").alias("start_ns"),
        F.max("time_ns").alias("end_ns"),
        F.first("lso").alias("lso"),
        F.min(F.when(F.col("hw") > F.col("lso"), F.col("time_ns"))).alias("behind_ns"),
        F.min_by("hw", "time_ns").alias("hw_start"),
        F.max_by("hw", "time_ns").alias("hw_end"),
        F.count(F.lit(1)).alias("samples"),
    )
    base_ms = (
        ctx.data.run.transaction_timeout_ms
        + RULE.ABORT_CLEANUP_INTERVAL_MS
        + RULE.SAMPLING_SLACK_MS
    )
    recovery_ms = lost_request_recovery_ms(ctx.data.run.info)
    stalls = runs.filter(
        (F.col("hw_end") > F.col("hw_start"))
        & (F.col("hw_end") > F.col("lso"))
        & ((F.col("end_ns") - F.col("behind_ns")) > F.lit(base_ms * 1_000_000))
    ).collect()
    for r in stalls:
        allowed_ms = stall_allowance_ms(
            base_ms, ctx.data.faults, r["behind_ns"], r["end_ns"], recovery_ms
        )
        down = node_down_ns(ctx.data.faults, r["behind_ns"], r["end_ns"])
        if r["end_ns"] - r["behind_ns"] - down <= allowed_ms * 1_000_000:
            continue
        faults = [
            f
            for f in ctx.data.faults
            if f["start_ns"] <= r["end_ns"] and (f["end_ns"] or r["end_ns"]) >= r["behind_ns"]
        ]
        out.rows.append(
            row(
                NAME,
                "lso_stall",
                r["behind_ns"],
                {
                    "topic": r["topic"],
                    "partition": r["partition"],
                    "lso": r["lso"],
                    "high_watermark": [r["hw_start"], r["hw_end"]],
                    "stalled_ms": (r["end_ns"] - r["behind_ns"]) // 1_000_000,
                    "allowed_ms": allowed_ms,
                    "nodes_down_ms": down // 1_000_000,
                    "from_ns": r["behind_ns"],
                    "to_ns": r["end_ns"],
                    "overlapping_faults": faults,
                },
            )
        )
    return True


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(
        NAME,
        KINDS,
    )
    fs = ctx.data.final_state
    have_state = fs is not None
    if fs is not None:
        final_state_rules(out, fs, ctx.data.run.transaction_max_timeout_ms)
    else:
        out.notes.append("no final_state.json: end-of-run rules not checked")
    have_samples = _stalls(ctx, out)
    if not have_samples:
        out.notes.append("no harness LSO/high-watermark samples: lso_stall not checked")
    if not have_state and not have_samples:
        out.unknown = "neither final_state.json nor LSO samples in the run directory"
    return out
