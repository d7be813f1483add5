"""A load test's headline numbers, for verdict.json and the report: committed transactions per
second and latency percentiles per operation type.  Plain Python over what either engine
computes (the summary's per-second timeline and :func:`~.report_series.series_of_counts`),
so the Spark pipeline and the reference engine report them alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..rundir.schema import EventType


def committed_per_second(timeline: Iterable[Mapping[str, Any]]) -> float | None:
    """Committed transactions per second between the first and the last second with a
    commit (None when nothing committed)."""
    per_sec: dict[int, int] = {}
    for r in timeline:
        if r["type"] == EventType.COMMIT.value and r["outcome"] == "ok":
            per_sec[int(r["sec"])] = per_sec.get(int(r["sec"]), 0) + int(r["ops"])
    if not per_sec:
        return None
    return sum(per_sec.values()) / (max(per_sec) - min(per_sec) + 1)


def load_stats(timeline: Iterable[Mapping[str, Any]], series: Mapping[str, Any]) -> dict[str, Any]:
    """``committed_txn_per_s`` and ``latency_ms`` (per operation type: n, p50_ms, p95_ms,
    p99_ms over the whole run) for a verdict's stats."""
    rate = committed_per_second(timeline)
    return {
        "committed_txn_per_s": None if rate is None else round(rate, 2),
        "latency_ms": {
            typ: {k: (v if k == "n" else round(v, 3)) for k, v in p.items()}
            for typ, p in (series.get("latency_overall") or {}).items()
        },
    }
