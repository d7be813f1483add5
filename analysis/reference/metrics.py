"""Metrics: the nodes' own transaction metrics against the ground truth from the history and the
final state.  The reference of analysis/checkers/metrics.py (its docstring states the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...harness.history.schema import EventType, Outcome
from ...harness.history.schema import MetricName as M
from .hanging import RunFacts
from .history import Op
from .indexes import Indexes
from .metric_counters import judge_counters
from .metric_rules import (
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
from .rows import Judged

Sample = dict[str, Any]  #: a row of metrics.parquet


def producers(ops: Sequence[Op]) -> dict[tuple[Any, Any], dict[int, bool]]:
    """Per (topic, partition) a send went to ((None, None) for a send without items): producer id
    -> whether a send of it there was acknowledged."""
    out: dict[tuple[Any, Any], dict[int, bool]] = {}
    for op in ops:
        if op.type != EventType.SEND or op.producer_id is None:
            continue
        for tp in [(it.topic, it.partition) for it in op.items] or [(None, None)]:
            known = out.setdefault(tp, {})
            known[op.producer_id] = known.get(op.producer_id, False) or op.outcome == Outcome.OK
    return out


def _latest(samples: list[Sample]) -> list[Sample]:
    """Per (node, name, topic, partition): its latest sample (``t``: its time)."""
    last: dict[tuple[Any, ...], Sample] = {}
    for m in samples:
        key = (m["node"], m["name"], m.get("topic"), m.get("partition"))
        cur = last.get(key)
        if cur is None or m["time_ns"] > cur["t"]:
            last[key] = {**m, "t": m["time_ns"]}
    return list(last.values())


def metrics(ix: Indexes, facts: RunFacts) -> Judged:
    """(a) late transactions, (b) LSO lag, (c) producer ids, (d) transaction counters."""
    out = Judged(NAME, KINDS)
    if facts.metrics is None or not facts.info.get("metrics_supported", True):
        out.unknown = "the cluster exposes no metrics (skipped)"
        return out
    samples = [m for m in facts.metrics if m["name"] in NODE_METRICS]
    last = _latest(samples)
    names = {r["name"] for r in last}
    if not names:
        out.unknown = "no transaction metrics were scraped from the nodes (skipped)"
        return out
    missing = [n for n in NODE_METRICS if n not in names]
    fs = facts.final_state
    short = cut_short(facts.info)
    if short:
        out.notes.append(short)
    if M.PARTITIONS_WITH_LATE_TXNS.value in names:
        late = [r for r in last if r["name"] == M.PARTITIONS_WITH_LATE_TXNS.value]
        _late(facts, out, samples, late)
    if M.LAST_STABLE_OFFSET_LAG.value in names:
        if fs is None:
            out.notes.append("no final state: LastStableOffsetLag not checked")
        else:
            lso_lag(out, fs, [r for r in last if r["name"] == M.LAST_STABLE_OFFSET_LAG.value])
    if M.PRODUCER_ID_COUNT.value in names:
        expiring = ids_may_expire(facts.info)
        if expiring:
            out.notes.append(expiring)
        pids = [r for r in last if r["name"] == M.PRODUCER_ID_COUNT.value]
        unnamed = any(op.type == EventType.SEND and op.producer_id is None for op in ix.ops)
        producer_id_count(
            out,
            producers(ix.ops),
            fs,
            pids,
            lower_bound=not short and not expiring,
            unnamed_sends=unnamed,
        )
    if any(c in names for c in COUNTERS):
        judge_counters(ix, facts, out, samples)
    if missing:  # never valid on what was not seen
        out.unknown = unexposed(missing, [n for n in NODE_METRICS if n in names], facts.info)
    return out


def _late(facts: RunFacts, out: Judged, samples: list[Sample], latest: list[Sample]) -> None:
    limit_ms = facts.transaction_max_timeout_ms + LATE_BUFFER_MS
    if facts.final_state is not None:
        late_at_end(out, facts.final_state, latest, limit_ms)
    started = facts.info.get("started_ns")
    if started is None:
        return
    early = [
        m
        for m in samples
        if m["name"] == M.PARTITIONS_WITH_LATE_TXNS.value
        and m["value"] > 0
        and m["time_ns"] - started <= limit_ms * 1_000_000
    ]
    late_too_early(out, min(early, key=lambda m: m["time_ns"], default=None), started)
