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
process was never scraped, that counter's lower bound is not checked. A run cut short (run.json
not complete: no final phase, so the last scrapes may predate its last transactions) has the
lower bounds of (c) and (d) unchecked. A metric the nodes do not
expose (an Apache Kafka release has no transaction counters) makes the checker unknown, never
valid: the reason names it (with the launcher's word on why, run.json's
cluster.metrics_unavailable) and what was judged; a violated rule still makes it invalid.
Clusters that expose no metrics make the checker unknown.
Count: violated rule instances."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ...harness.history.schema import EventType
from ...harness.history.schema import MetricName as M
from ..reference.metric_rules import (
    COUNTERS,
    KINDS,
    LATE_BUFFER_MS,
    NAME,
    NODE_METRICS,
    cut_short,
    ids_may_expire,
    late_at_end,
    late_too_early,
    lso_lag,
    producer_id_count,
    unexposed,
)
from .base import CheckOutput, definition
from .context import CheckContext
from .metric_counters import check_counters
from .protocol import Reads

READS = frozenset({Reads.METRICS, Reads.FINAL_STATE, Reads.TRANSACTIONS, Reads.FAULTS})


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
    fs = ctx.data.final_state
    short = cut_short(ctx.data.run.info)
    if short:
        out.notes.append(short)
    if M.PARTITIONS_WITH_LATE_TXNS.value in names:
        _late(ctx, out, m, [r for r in last if r["name"] == M.PARTITIONS_WITH_LATE_TXNS.value])
    if M.LAST_STABLE_OFFSET_LAG.value in names:
        if fs is None:
            out.notes.append("no final state: LastStableOffsetLag not checked")
        else:
            lso_lag(out, fs, [r for r in last if r["name"] == M.LAST_STABLE_OFFSET_LAG.value])
    if M.PRODUCER_ID_COUNT.value in names:
        expiring = ids_may_expire(ctx.data.run.info)
        if expiring:
            out.notes.append(expiring)
        # producer ids per partition come from the summary pass (no extra scan of the history)
        pids = [r for r in last if r["name"] == M.PRODUCER_ID_COUNT.value]
        h = ctx.data.history
        unnamed = bool(
            h.filter((F.col("type") == EventType.SEND.value) & F.col("producer_id").isNull())
            .limit(1)
            .count()
        )
        producer_id_count(
            out,
            ctx.proj.summary.producers,
            fs,
            pids,
            lower_bound=not short and not expiring,
            unnamed_sends=unnamed,
        )
    if any(c in names for c in COUNTERS):
        check_counters(ctx, out, m)
    if missing:  # never valid on what was not seen
        out.unknown = unexposed(missing, [n for n in NODE_METRICS if n in names], ctx.data.run.info)
    return out


def _late(ctx: CheckContext, out: CheckOutput, m: Any, latest: list[Any]) -> None:
    limit_ms = ctx.data.run.transaction_max_timeout_ms + LATE_BUFFER_MS
    if ctx.data.final_state is not None:
        late_at_end(out, ctx.data.final_state, latest, limit_ms)
    started = ctx.data.run.info.get("started_ns")
    if started is None:
        return
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
    late_too_early(out, early[0] if early else None, started)
