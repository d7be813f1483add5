"""The summary pass and the report's series in plain Python, over the flat history rows and the
metric samples: the same rows and series the Spark jobs compute (summary.py,
report_series_spark.py, the pipeline's LSO series), for the reference engine."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ...rundir.schema import EventType, MetricName, Outcome
from ..model.indexes import Txn
from ..report_series import (
    MAX_PLOT_PARTITIONS,
    MAX_PLOT_POINTS,
    bucket_of,
    bucket_seconds,
    latency_bin,
    series_of_counts,
)
from ..summary_rows import SEC, Summary, summary_of_rows

Row = dict[str, Any]  #: a row of history.parquet (one per item) or of metrics.parquet


def _first(r: Row) -> bool:
    """The row that stands for its op (its first item, or the op without items)."""
    return r["item"] is None or r["item"] == 0


def summarize(rows: Iterable[Row]) -> Summary:
    """The summary of a history from its flat rows (summary.py's job, row for row)."""
    timeline: dict[tuple[Any, ...], Row] = {}
    combos: dict[tuple[Any, ...], Row] = {}
    start = EventType.START.value
    for r in rows:
        first = _first(r)
        lat = r["complete_ns"] - r["invoke_ns"] if first and r["complete_ns"] is not None else None
        is_start = r["type"] == start
        key = (
            math.floor(float(r["invoke_ns"]) / SEC),
            r["type"],
            r["outcome"],
            r["process"] if is_start else None,
            r["op_id"] if is_start else None,
        )
        t = timeline.get(key)
        if t is None:
            t = timeline[key] = {"ops": 0, "rows": 0, "lat_sum": None, "lat_n": 0, "lat_max": None}
        t["ops"] += first
        t["rows"] += 1
        if lat is not None:
            t["lat_sum"] = (t["lat_sum"] or 0) + lat
            t["lat_n"] += 1
            t["lat_max"] = lat if t["lat_max"] is None else max(t["lat_max"], lat)
        send = r["type"] == EventType.SEND.value and r["producer_id"] is not None
        ckey = (r["process"], r["topic"], r["partition"], r["producer_id"] if send else None)
        c = combos.get(ckey)
        if c is None:
            c = combos[ckey] = {"min_op": r["op_id"], "max_op": r["op_id"], "offs": [], "acked": 0}
        c["min_op"], c["max_op"] = min(c["min_op"], r["op_id"]), max(c["max_op"], r["op_id"])
        if r["offset"] is not None:
            c["offs"].append(r["offset"])
        c["acked"] |= send and r["outcome"] == Outcome.OK
    out: list[Row] = []
    for (sec, typ, outcome, process, op_id), t in timeline.items():
        out.append(
            {"tag": "T", "sec": sec, "type": typ, "outcome": outcome, "process": process}
            | {"op_id": op_id, **t, "topic": None, "partition": None, "pid": None}
        )
    for (process, topic, partition, pid), c in combos.items():
        offs = c["offs"]
        out.append(
            {"tag": "C", "process": process, "op_id": c["max_op"], "ops": c["min_op"]}
            | {"topic": topic, "partition": partition, "pid": pid, "acked": bool(c["acked"])}
            | {"min_off": min(offs, default=None), "max_off": max(offs, default=None)}
            | {"process_key": None, "topic_key": None}
        )
    return summary_of_rows(out)[0]


def report_series(rows: Iterable[Row], txns: Iterable[Txn], t0_ns: int, t1_ns: int) -> Row:
    """Latency quantiles per (bucket, type) and open transactions per bucket
    (report_series_spark.py's job)."""
    width = bucket_seconds(t1_ns - t0_ns) * SEC
    hist: dict[tuple[int, str], dict[int, int]] = {}
    for r in rows:
        if not _first(r) or r["complete_ns"] is None:
            continue
        lat = r["complete_ns"] - r["invoke_ns"]
        if lat < 0:
            continue
        bins = hist.setdefault((bucket_of(r["invoke_ns"], t0_ns, width), r["type"]), {})
        b = latency_bin(lat)
        bins[b] = bins.get(b, 0) + 1
    change: dict[int, int] = {}
    for t in txns:
        assert t.begin_ns is not None  # every transaction has an op
        b = bucket_of(t.begin_ns, t0_ns, width)
        change[b] = change.get(b, 0) + 1
        if t.end_ns is not None:
            e = bucket_of(t.end_ns, t0_ns, width) + 1
            change[e] = change.get(e, 0) - 1
    return series_of_counts(hist, change, t0_ns, t1_ns)


def lso_series(metrics: Sequence[Row] | None) -> Row:
    """The LSO lag of the most lagging partitions over time: the harness's own samples
    (high watermark - LSO), else the nodes' LastStableOffsetLag (the pipeline's LSO series)."""
    if metrics is None:
        return {}
    lso_n, hw_n = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value
    at: dict[tuple[Any, Any, int], dict[str, float]] = {}
    for m in metrics:
        if m["name"] in (lso_n, hw_n) and m["topic"] is not None:
            s = at.setdefault((m["topic"], m["partition"], m["time_ns"]), {})
            s[m["name"]] = max(s.get(m["name"], m["value"]), m["value"])
    lag = {k: s[hw_n] - s[lso_n] for k, s in at.items() if len(s) == 2}
    source = "harness LSO/high-watermark samples"
    if not lag:
        name = MetricName.LAST_STABLE_OFFSET_LAG.value
        for m in metrics:
            if m["name"] == name and m["topic"] is not None:
                k = (m["topic"], m["partition"], m["time_ns"])
                lag[k] = max(lag.get(k, m["value"]), m["value"])
        source = "LastStableOffsetLag metric"
        if not lag:
            return {}
    t0 = min(t for _, _, t in lag)
    t1 = max(t for _, _, t in lag)
    bucket = max(SEC, (t1 - t0) // MAX_PLOT_POINTS + 1)
    top: dict[tuple[Any, Any], float] = {}
    for (topic, part, _), v in lag.items():
        top[(topic, part)] = max(top.get((topic, part), v), v)
    ranked = sorted(top, key=lambda tp: (-top[tp], tp[0], tp[1]))[:MAX_PLOT_PARTITIONS]
    keep = set(ranked)
    pts: dict[tuple[Any, Any, int], float] = {}
    for (topic, part, t), v in lag.items():
        if (topic, part) in keep:
            k = (topic, part, bucket_of(t, t0, bucket))
            pts[k] = max(pts.get(k, v), v)
    series: dict[str, list[tuple[float, float]]] = {}
    for (topic, part, b), v in pts.items():
        series.setdefault(f"{topic}/{part}", []).append(((t0 + b * bucket) / SEC, float(v)))
    return {"source": source, "series": {k: sorted(v) for k, v in series.items()}}
