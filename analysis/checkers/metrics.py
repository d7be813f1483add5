"""Metrics: the cluster's own transaction metrics, as scraped from the nodes, against the ground
truth computed from the history and the final cluster state. Tolerances:
(a) PartitionsWithLateTransactionsCount — summed over nodes at the last scrape, it equals the
number of partitions holding an open transaction older than transaction.max.timeout.ms + 5 min
at that time (exact); and no sample is non-zero while the run is younger than that limit.
(b) LastStableOffsetLag — per partition, the latest sample (max over nodes at that time), if
taken no earlier than 2 s before the final state was captured, equals high watermark - LSO from
the final state (exact). (c) ProducerIdCount — summed over nodes at the last scrape, at least
the number of distinct producer ids with an acknowledged write and at most the sum over
partitions of (distinct producer ids that attempted writes there x replicas). (d) transaction
counters (TransactionsCommitted / TransactionsAborted, per node in memory, counted when the
coordinator writes CompleteCommit / CompleteAbort; only transactions that wrote something
count). Upper bound: every increase seen, summed over nodes (a drop read as a restart from
zero), is at most acknowledged + unknown-outcome commits — a restart cannot push it over, as a
transaction is counted once: the count follows the persisted CompleteCommit, and a restarted
coordinator resumes (and counts) only transactions it finds still in PrepareCommit. Lower
bounds: the counters summed over nodes at their last scrapes are at least the acknowledged
commits, and at least the acknowledged aborts of transactions that got a write acknowledged or
sent offsets (timeouts may add more; an abort whose records were all purged unsent never
reaches the coordinator, as librdkafka then sends no EndTxn). When a counting node restarted
(a kill or restart of it in the fault log, or a sample below the one before), what it counted
between its last scrape and the restart is lost with the process, so the lower bounds count
only commits invoked, and aborts of transactions begun, after the last such restart over every
counting node ended (the end of its fault; for a drop no such fault spans, the sample that
dropped), against the counters' values at the nodes' last scrapes: the nodes' last processes
count those in full; earlier ones are not checked (the notes say how many).
A pause keeps the process and its counters, so it leaves the bounds whole. If a node's last
process was never scraped, that counter's lower bound is not checked. Rules whose metric is
absent are listed as not checked; clusters that expose no metrics make the checker unknown.
Count: violated rule instances."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ...harness.history.final_state import FinalState
from ...harness.history.schema import MetricName as M
from .base import CheckOutput, definition, row
from .context import CheckContext
from .metric_counters import COUNTERS, check_counters
from .protocol import Reads

NAME = "metrics"
KINDS: tuple[str, ...] = (
    "late_transactions_count",
    "lso_lag",
    "producer_id_count",
    "transaction_counters",
)
READS = frozenset({Reads.METRICS, Reads.FINAL_STATE, Reads.TRANSACTIONS, Reads.FAULTS})
LATE_BUFFER_MS = 5 * 60 * 1000
LAG_FRESHNESS_NS = 2_000_000_000
NODE_METRICS = (
    M.PARTITIONS_WITH_LATE_TXNS.value,
    M.LAST_STABLE_OFFSET_LAG.value,
    M.PRODUCER_ID_COUNT.value,
    *COUNTERS,
)


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(
        NAME,
        definition(__doc__),
        KINDS,
    )
    m = ctx.data.metrics
    if m is None or not ctx.data.run.info.get("metrics_supported", True):
        out.unknown = "the cluster exposes no metrics (skipped)"
        return out
    m = m.filter(F.col("name").isin(*NODE_METRICS))
    last = (
        m.groupBy("node", "name", "topic", "partition")
        .agg(F.max("time_ns").alias("t"), F.max_by("value", "time_ns").alias("value"))
        .collect()
    )
    names = {r["name"] for r in last}
    if not names:
        out.unknown = "no transaction metrics were scraped from the nodes (skipped)"
        return out
    missing = [n for n in NODE_METRICS if n not in names]
    if missing:
        out.notes.append("not exposed, not checked: " + ", ".join(missing))
    fs = ctx.data.final_state
    if M.PARTITIONS_WITH_LATE_TXNS.value in names:
        _late(ctx, out, m, [r for r in last if r["name"] == M.PARTITIONS_WITH_LATE_TXNS.value])
    if M.LAST_STABLE_OFFSET_LAG.value in names:
        if fs is None:
            out.notes.append("no final state: LastStableOffsetLag not checked")
        else:
            _lag(out, fs, [r for r in last if r["name"] == M.LAST_STABLE_OFFSET_LAG.value])
    if M.PRODUCER_ID_COUNT.value in names:
        _pids(ctx, out, fs, [r for r in last if r["name"] == M.PRODUCER_ID_COUNT.value])
    if any(c in names for c in COUNTERS):
        check_counters(ctx, out, m)
    return out


def _late(ctx: CheckContext, out: CheckOutput, m: Any, rows: list[Any]) -> None:
    limit_ms = ctx.data.run.transaction_max_timeout_ms + LATE_BUFFER_MS
    t = max(r["t"] for r in rows)
    reported = sum(r["value"] for r in rows)
    fs = ctx.data.final_state
    if fs is not None:
        late = {
            (o.get("topic"), o.get("partition"))
            for o in fs.get("open_transactions") or []
            if o.get("start_ns") is not None and t - o["start_ns"] > limit_ms * 1_000_000
        }
        out.checked["late_transactions_final"] = 1
        if reported != len(late):
            out.rows.append(
                row(
                    NAME,
                    "late_transactions_count",
                    t,
                    {
                        "metric": M.PARTITIONS_WITH_LATE_TXNS.value,
                        "reported_sum_over_nodes": reported,
                        "expected": len(late),
                        "late_partitions": sorted(map(list, late)),
                        "per_node": {r["node"]: r["value"] for r in rows},
                        "tolerance": "exact",
                    },
                )
            )
    started = ctx.data.run.info.get("started_ns")
    if started is not None:
        early = (
            m.filter(
                (F.col("name") == M.PARTITIONS_WITH_LATE_TXNS.value)
                & (F.col("value") > 0)
                & (F.col("time_ns") - F.lit(started) <= F.lit(limit_ms * 1_000_000))
            )
            .orderBy("time_ns")
            .limit(1)
            .collect()
        )
        for r in early:
            out.rows.append(
                row(
                    NAME,
                    "late_transactions_count",
                    r["time_ns"],
                    {
                        "metric": M.PARTITIONS_WITH_LATE_TXNS.value,
                        "node": r["node"],
                        "reported": r["value"],
                        "run_age_ms": (r["time_ns"] - started) // 1_000_000,
                        "why": "no transaction can be late this early in the run",
                    },
                )
            )


def _lag(out: CheckOutput, fs: FinalState, rows: list[Any]) -> None:
    captured = fs.get("captured_ns") or 0
    latest: dict[tuple[str, int], tuple[int, float, dict[str, float]]] = {}
    for r in rows:
        key = (r["topic"], r["partition"])
        cur = latest.get(key)
        if cur is None or r["t"] > cur[0]:
            latest[key] = (r["t"], r["value"], {r["node"]: r["value"]})
        elif r["t"] == cur[0]:
            latest[key] = (cur[0], max(cur[1], r["value"]), {**cur[2], r["node"]: r["value"]})
    stale = 0
    for p in fs["partitions"]:
        key = (p["topic"], p["partition"])
        if key not in latest:
            continue
        t, value, per_node = latest[key]
        if t < captured - LAG_FRESHNESS_NS:
            stale += 1
            continue
        expected = p["high_watermark"] - p["lso"]
        out.checked["lso_lag_partitions"] = out.checked.get("lso_lag_partitions", 0) + 1
        if value != expected:
            out.rows.append(
                row(
                    NAME,
                    "lso_lag",
                    t,
                    {
                        "metric": M.LAST_STABLE_OFFSET_LAG.value,
                        "topic": p["topic"],
                        "partition": p["partition"],
                        "reported": value,
                        "per_node": per_node,
                        "expected": expected,
                        "final_state": {"lso": p["lso"], "high_watermark": p["high_watermark"]},
                        "tolerance": "exact",
                    },
                )
            )
    if stale:
        out.notes.append(f"{stale} partitions' LastStableOffsetLag samples predate the final state")


def _pids(ctx: CheckContext, out: CheckOutput, fs: FinalState | None, rows: list[Any]) -> None:
    # producer ids per partition come from the summary pass (no extra scan of the history)
    producers = ctx.proj.summary.producers
    lower = len({pid for pids in producers.values() for pid, acked in pids.items() if acked})
    n_by_tp = {tp: len(pids) for tp, pids in producers.items()}
    replicas = {
        (p["topic"], p["partition"]): len(p.get("replicas") or [])
        for p in (fs["partitions"] if fs is not None else [])
    }
    upper: int | None = None
    if fs is not None and all(replicas.get(tp) for tp in n_by_tp):
        upper = sum(n * replicas[tp] for tp, n in n_by_tp.items())
    t = max(r["t"] for r in rows)
    reported = sum(r["value"] for r in rows)
    out.checked["producer_id_count"] = 1
    if reported < lower or (upper is not None and reported > upper):
        out.rows.append(
            row(
                NAME,
                "producer_id_count",
                t,
                {
                    "metric": M.PRODUCER_ID_COUNT.value,
                    "reported_sum_over_nodes": reported,
                    "per_node": {r["node"]: r["value"] for r in rows},
                    "expected_at_least": lower,
                    "expected_at_most": upper,
                },
            )
        )
