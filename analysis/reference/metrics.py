"""Metrics: the nodes' own transaction metrics against the ground truth from the history and the
final state.  The reference of analysis/checkers/metrics.py (its docstring states the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...harness.history.final_state import FinalState
from ...harness.history.schema import EventType, Outcome
from ...harness.history.schema import MetricName as M
from .hanging import RunFacts
from .history import Op
from .indexes import Indexes
from .metric_counters import COUNTERS, judge_counters
from .rows import Judged, row

NAME = "metrics"
KINDS = ("late_transactions_count", "lso_lag", "producer_id_count", "transaction_counters")
LATE_BUFFER_MS = 5 * 60 * 1000
LAG_FRESHNESS_NS = 2_000_000_000
NODE_METRICS = (
    M.PARTITIONS_WITH_LATE_TXNS.value,
    M.LAST_STABLE_OFFSET_LAG.value,
    M.PRODUCER_ID_COUNT.value,
    *COUNTERS,
)
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
    if missing:
        out.notes.append("not exposed, not checked: " + ", ".join(missing))
    fs = facts.final_state
    if M.PARTITIONS_WITH_LATE_TXNS.value in names:
        late = [r for r in last if r["name"] == M.PARTITIONS_WITH_LATE_TXNS.value]
        _late(facts, out, samples, late)
    if M.LAST_STABLE_OFFSET_LAG.value in names:
        if fs is None:
            out.notes.append("no final state: LastStableOffsetLag not checked")
        else:
            _lag(out, fs, [r for r in last if r["name"] == M.LAST_STABLE_OFFSET_LAG.value])
    if M.PRODUCER_ID_COUNT.value in names:
        pids = [r for r in last if r["name"] == M.PRODUCER_ID_COUNT.value]
        _pids(ix, out, fs, pids)
    if any(c in names for c in COUNTERS):
        judge_counters(ix, facts, out, samples)
    return out


def _late(facts: RunFacts, out: Judged, samples: list[Sample], rows: list[Sample]) -> None:
    limit_ms = facts.transaction_max_timeout_ms + LATE_BUFFER_MS
    t = max(r["t"] for r in rows)
    reported = sum(r["value"] for r in rows)
    fs = facts.final_state
    if fs is not None:
        late = {
            (o.get("topic"), o.get("partition"))
            for o in fs.get("open_transactions") or []
            if o.get("start_ns") is not None and t - o["start_ns"] > limit_ms * 1_000_000
        }
        out.checked["late_transactions_final"] = 1
        if reported != len(late):
            ev = {
                "metric": M.PARTITIONS_WITH_LATE_TXNS.value,
                "reported_sum_over_nodes": reported,
                "expected": len(late),
                "late_partitions": sorted(map(list, late)),
                "per_node": {r["node"]: r["value"] for r in rows},
                "tolerance": "exact",
            }
            out.rows.append(row(NAME, "late_transactions_count", t, ev, as_json=False))
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
    for m in sorted(early, key=lambda m: m["time_ns"])[:1]:
        ev = {
            "metric": M.PARTITIONS_WITH_LATE_TXNS.value,
            "node": m["node"],
            "reported": m["value"],
            "run_age_ms": (m["time_ns"] - started) // 1_000_000,
            "why": "no transaction can be late this early in the run",
        }
        out.rows.append(row(NAME, "late_transactions_count", m["time_ns"], ev, as_json=False))


def _lag(out: Judged, fs: FinalState, rows: list[Sample]) -> None:
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
            ev = {
                "metric": M.LAST_STABLE_OFFSET_LAG.value,
                "topic": p["topic"],
                "partition": p["partition"],
                "reported": value,
                "per_node": per_node,
                "expected": expected,
                "final_state": {"lso": p["lso"], "high_watermark": p["high_watermark"]},
                "tolerance": "exact",
            }
            out.rows.append(row(NAME, "lso_lag", t, ev, as_json=False))
    if stale:
        out.notes.append(f"{stale} partitions' LastStableOffsetLag samples predate the final state")


def _pids(ix: Indexes, out: Judged, fs: FinalState | None, rows: list[Sample]) -> None:
    sent = producers(ix.ops)
    lower = len({pid for pids in sent.values() for pid, acked in pids.items() if acked})
    n_by_tp = {tp: len(pids) for tp, pids in sent.items()}
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
        ev = {
            "metric": M.PRODUCER_ID_COUNT.value,
            "reported_sum_over_nodes": reported,
            "per_node": {r["node"]: r["value"] for r in rows},
            "expected_at_least": lower,
            "expected_at_most": upper,
        }
        out.rows.append(row(NAME, "producer_id_count", t, ev, as_json=False))
