"""The Spark implementation of rules/metrics.py (whose docstring is the definition):
the latest sample per node and series is collected from the metric samples
and judged with the rule's own functions (rules/metric_samples.py); the counters' series, rule
(d), are summarised with a window per node and counter (metric_counters.py)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ....rundir.schema import EventType
from ....rundir.schema import MetricName as M
from ...rules import metrics
from ...rules.metric_samples import (
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
from .base import CheckOutput
from .context import CheckContext
from .metric_counters import check_counters
from .protocol import Reads

RULE = metrics

READS = frozenset({Reads.METRICS, Reads.FINAL_STATE, Reads.TRANSACTIONS, Reads.FAULTS})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(
        NAME,
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
        # producer ids per partition come from the summary pass; whether any send lacks its
        # producer id is asked of the history itself (the summary's rows mix sends with other
        # operations, so a null producer id there is not a send's)
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
