"""Hanging transactions. (a) end_lso_lag: after healing and quiescence, a partition's last stable
offset is below its high watermark. (b) stale_open_transaction: an open transaction (on a
partition, or Ongoing/Prepare* at its coordinator) older than transaction.max.timeout.ms when
the final state was captured. (c) coordinator_mismatch: a partition holds an open transaction
of a producer id the coordinator does not list as Ongoing or Prepare* (for that partition, when
the coordinator lists partitions). (d) lso_stall: over the run (harness LSO/high-watermark
samples), a partition's LSO stood still while its high watermark moved, and stayed below the
high watermark for longer than the producers' transaction.timeout.ms plus the abort-cleanup
interval (10 s) plus 5 s of sampling slack (the stall is timed from the first sample where the
high watermark is above the LSO: an idle partition is not stalled), not counting the time a
node was killed, paused or restarting (a transaction whose coordinator or partition leader is
down cannot end); when a node-to-node request
or response was lost on a live connection (a drop or blackhole on an nA->nB link) from that
allowance before the stall to its end, plus the time the cluster's nodes take to notice and
retry it (run.json's cluster.lost_request_recovery_ms: Apache Kafka's request.timeout.ms,
30 s by default; none for the project's nodes, which probe a silent request within seconds).
Counts: (a) partitions, (b) producer ids, (c) open partition transactions, (d) stall episodes.
(a)-(c) need final_state.json; (d) needs harness samples."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from ...harness.history.final_state import CoordinatorTransaction, OpenTransaction
from ...harness.history.schema import MetricName
from ..reference.hanging import lost_request_recovery_ms, node_down_ns, stall_allowance_ms
from .base import CheckOutput, definition, row
from .context import CheckContext
from .protocol import Reads

NAME = "hanging_transactions"
KINDS: tuple[str, ...] = (
    "end_lso_lag",
    "stale_open_transaction",
    "coordinator_mismatch",
    "lso_stall",
)
READS = frozenset({Reads.FINAL_STATE, Reads.METRICS, Reads.FAULTS})
ABORT_CLEANUP_INTERVAL_MS = 10_000
SAMPLING_SLACK_MS = 5_000
ACTIVE_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence", "Prepared"}


def _final_state_rows(ctx: CheckContext, out: CheckOutput) -> None:
    fs = ctx.data.final_state
    assert fs is not None
    captured = fs.get("captured_ns")
    max_timeout_ns = ctx.data.run.transaction_max_timeout_ms * 1_000_000
    opens: list[OpenTransaction] = fs.get("open_transactions") or []
    by_tp: dict[tuple[Any, Any], list[OpenTransaction]] = {}  # as the JSON has them
    for o in opens:
        by_tp.setdefault((o.get("topic"), o.get("partition")), []).append(o)
    for p in fs["partitions"]:
        if p["lso"] < p["high_watermark"]:
            out.rows.append(
                row(
                    NAME,
                    "end_lso_lag",
                    captured,
                    {
                        "topic": p["topic"],
                        "partition": p["partition"],
                        "lso": p["lso"],
                        "high_watermark": p["high_watermark"],
                        "lag": p["high_watermark"] - p["lso"],
                        "open_transactions": by_tp.get((p["topic"], p["partition"]), []),
                    },
                )
            )
    out.checked["partitions"] = len(fs["partitions"])
    coord = fs.get("coordinator_transactions")
    stale: dict[Any, dict[str, Any]] = {}
    if captured is not None:
        for o in opens:
            start = o.get("start_ns")
            if start is not None and captured - start > max_timeout_ns:
                stale.setdefault(
                    o.get("producer_id"), {"partition_state": [], "coordinator": None}
                )["partition_state"].append(o)
        for c in coord or []:
            start = c.get("start_ns")
            if (
                c.get("state") in ACTIVE_STATES
                and start is not None
                and captured - start > max_timeout_ns
            ):
                stale.setdefault(
                    c.get("producer_id"), {"partition_state": [], "coordinator": None}
                )["coordinator"] = c
    for pid, ev in sorted(stale.items(), key=lambda kv: str(kv[0])):
        starts = [o.get("start_ns") for o in ev["partition_state"]]
        if ev["coordinator"]:
            starts.append(ev["coordinator"].get("start_ns"))
        start = min(s for s in starts if s is not None)
        out.rows.append(
            row(
                NAME,
                "stale_open_transaction",
                start,
                {
                    "producer_id": pid,
                    "age_ms": (captured - start) // 1_000_000,
                    "transaction_max_timeout_ms": ctx.data.run.transaction_max_timeout_ms,
                    **ev,
                },
            )
        )
    if coord is None:
        out.notes.append(
            "the cluster exposes no coordinator state: coordinator_mismatch not checked"
        )
        return
    active: dict[Any, list[CoordinatorTransaction]] = {}
    for c in coord:
        if c.get("state") in ACTIVE_STATES:
            active.setdefault(c.get("producer_id"), []).append(c)
    for o in opens:
        cs = active.get(o.get("producer_id"), [])
        ok = any(
            not c.get("partitions")
            or any(
                (q.get("topic"), q.get("partition")) == (o.get("topic"), o.get("partition"))
                for q in c["partitions"]
            )
            for c in cs
        )
        if not ok:
            out.rows.append(
                row(
                    NAME,
                    "coordinator_mismatch",
                    o.get("start_ns") or captured,
                    {
                        "partition_open_transaction": o,
                        "coordinator_view": [
                            c for c in coord if c.get("producer_id") == o.get("producer_id")
                        ],
                    },
                )
            )


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
    base_ms = ctx.data.run.transaction_timeout_ms + ABORT_CLEANUP_INTERVAL_MS + SAMPLING_SLACK_MS
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
        definition(__doc__),
        KINDS,
    )
    have_state = ctx.data.final_state is not None
    if have_state:
        _final_state_rows(ctx, out)
    else:
        out.notes.append("no final_state.json: end-of-run rules not checked")
    have_samples = _stalls(ctx, out)
    if not have_samples:
        out.notes.append("no harness LSO/high-watermark samples: lso_stall not checked")
    if not have_state and not have_samples:
        out.unknown = "neither final_state.json nor LSO samples in the run directory"
    return out
