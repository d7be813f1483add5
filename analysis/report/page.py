"""What the report says in words and tables: the verdict in a paragraph (what went wrong,
where, which faults were active), the anomalies' evidence as key/value rows, the fault table,
and the shared time axis every chart uses."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..fault_actions import FaultAction
from ..verdict import INVALID, UNKNOWN, Verdict
from .charts import Axis
from .explain import clock, readable

SEC = 1_000_000_000


def time_zero(v: Verdict) -> int:
    """The run's start: ``started_ns`` from run.json, else its first operation's second."""
    start = v.run.get("started_ns")
    if start:
        return int(start)
    secs = [r["sec"] for r in v.series.get("ops", [])]
    return int(min(secs)) * SEC if secs else 0


def workload_origin(v: Verdict) -> tuple[int | None, bool]:
    """(ns the schedule's ``at`` counts from, whether that is an estimate): run.json's
    ``workload_started_ns``, else the first operation's second (older runs)."""
    origin = v.run.get("workload_started_ns")
    if origin:
        return int(origin), False
    secs = [r["sec"] for r in v.series.get("ops", [])]
    return (int(min(secs)) * SEC if secs else None), True


def shared_axis(v: Verdict, actions: list[FaultAction], t0: int) -> Axis:
    """One x range for every chart: from the run's start (or anything earlier) to the last
    operation, fault, metric sample or anomaly."""
    ends: list[float] = [t0]
    secs = [r["sec"] for r in v.series.get("ops", [])]
    if secs:
        ends += [min(secs) * SEC, (max(secs) + 1) * SEC]
    for a in actions:
        ends += list(a.window)
        if a.scheduled:
            ends += list(a.scheduled)
    for pts in ((v.series.get("lso_lag") or {}).get("series") or {}).values():
        ends += [x * SEC for x, _ in pts]
    for c in v.checkers.values():
        ends += [e["time_ns"] for e in c.examples if e.get("time_ns") is not None]
    ended = v.run.get("ended_ns")
    if ended:
        ends.append(ended)
    lo, hi = (min(ends) - t0) / SEC, (max(ends) - t0) / SEC
    pad = max(0.5, (hi - lo) * 0.01)
    return Axis(t0, min(0.0, lo) - pad, hi + pad)


def seconds(ns: int | None, t0: int) -> str:
    return "—" if ns is None else f"{(ns - t0) / SEC:.3f} s ({clock(ns)})"


def window(w: tuple[int, int] | None, t0: int) -> str:
    if w is None:
        return "—"
    lo, hi = ((x - t0) / SEC for x in w)
    return f"{lo:.2f} s" if hi == lo else f"{lo:.2f} to {hi:.2f} s ({hi - lo:.2f} s)"


def active_at(actions: list[FaultAction], ns: int) -> list[FaultAction]:
    """The actions whose band (applied window, else scheduled) holds time ``ns``."""
    return [a for a in actions if a.window[0] <= ns <= a.window[1]]


def _where(evidence: Any) -> str:
    """The first partition and the processes an example's evidence names, as text."""
    partition = None
    actors: list[str] = []
    queue = deque([evidence])
    while queue:
        d = queue.popleft()
        if isinstance(d, list):
            queue.extend(d[:5])
            continue
        if not isinstance(d, dict):
            continue
        if partition is None and d.get("topic") is not None and d.get("partition") is not None:
            partition = f"{d['topic']}/{d['partition']}"
        for key in ("consumer", "reader", "process", "writer"):
            name = d.get(key)
            if isinstance(name, str) and name not in actors:
                actors.append(name)
        queue.extend(v for v in d.values() if isinstance(v, dict | list))
    parts = []
    if partition:
        parts.append(f"partition {partition}")
    if actors:
        parts.append(f"process{'es' if len(actors) > 1 else ''} {', '.join(actors[:4])}")
    return ", ".join(parts)


def _fault_list(actions: list[FaultAction]) -> str:
    return ", ".join(f"#{a.number} {a.kind} on {a.target}" for a in actions)


def summary_paragraph(v: Verdict, actions: list[FaultAction], t0: int) -> str:
    """The verdict in words; for an invalid run: what went wrong, where, which faults were
    active."""
    bad = [c for c in v.checkers.values() if c.status == INVALID]
    if not bad:
        unknown = [c.name for c in v.checkers.values() if c.status == UNKNOWN]
        text = f"No checker found an anomaly in {v.stats.get('ops', 0):,} operations"
        text += f" under {len(actions)} fault action{'s' if len(actions) != 1 else ''}."
        if unknown:
            text += f" Not checked (unknown): {', '.join(unknown)}."
        errors = len((v.nemesis or {}).get("errors") or [])
        if errors:
            text += (
                f" But the nemesis reported {errors} error{'s' if errors != 1 else ''}: the "
                "faults were not all carried out as scheduled (see Nemesis below)."
            )
        return text
    total = sum(c.anomaly_count for c in bad)
    what = "; ".join(
        f"{c.name} found {c.anomaly_count} ("
        + ", ".join(f"{k} {n}" for k, n in c.counts.items() if n)
        + ")"
        for c in bad
    )
    text = (
        f"This run is INVALID: {total} anomal{'y' if total == 1 else 'ies'} from "
        f"{len(bad)} checker{'s' if len(bad) != 1 else ''} — {what}."
    )
    examples = [
        (e["time_ns"], c.name, e) for c in bad for e in c.examples if e.get("time_ns") is not None
    ]
    if examples:
        ns, name, e = min(examples, key=lambda x: x[0])
        where = _where(e["evidence"])
        active = active_at(actions, ns)
        kind = e["kind"] if e["kind"] == name else f"{e['kind']} ({name})"
        text += f" The first, {kind} at {seconds(ns, t0)}"
        text += f", involves {where}" if where else ""
        text += (
            f", while {_fault_list(active)} {'was' if len(active) == 1 else 'were'} active."
            if active
            else ", with no fault active at that moment."
        )
    timed = v.series.get("anomalies") or []
    if timed:
        hit: dict[int, FaultAction] = {}
        during = 0
        for r in timed:
            lo, hi = int(r["sec"]) * SEC, (int(r["sec"]) + 1) * SEC
            active = [a for a in actions if a.window[0] < hi and lo <= a.window[1]]
            if active:
                during += int(r["n"])
                hit.update((a.number, a) for a in active)
        total_t = sum(int(r["n"]) for r in timed)
        faults = sorted(hit.values(), key=lambda a: a.number)
        text += (
            f" Of the {total_t:,} anomalies with a time, {during:,} fell in a second when a "
            f"fault was active" + (f" ({_fault_list(faults)})." if faults else ".")
        )
    for sentence in v.resembles:
        text += " " + sentence
    return text


@dataclass
class Example:
    anchor: str
    kind: str
    at: str
    weight: int
    where: str
    faults: str
    rows: list[tuple[str, str]]


def evidence_rows(
    evidence: Any, t0: int | None = None, keys: dict[str, str | None] | None = None
) -> list[tuple[str, str]]:
    """Top-level evidence fields as (key, text): scalars as they are, structures as compact
    JSON; with ``t0``, times (epoch ns) as seconds since the run started and on the clock; a
    record's ``value`` followed by its ``key`` when ``keys`` knows it."""
    if t0 is not None:
        evidence = readable(evidence, t0)
    if not isinstance(evidence, dict):
        return [("evidence", json.dumps(evidence, default=str))]
    out = []
    for k, val in evidence.items():
        if k == "value" and keys and isinstance(val, str) and val in keys:
            out.append(("value", val))
            out.append(("key", json.dumps(keys[val])))
            continue
        if isinstance(val, bool) or val is None:
            out.append((str(k), json.dumps(val)))
        elif isinstance(val, str | int | float):
            out.append((str(k), str(val)))
        else:
            out.append((str(k), json.dumps(val, default=str, separators=(", ", ": "))))
    return out


def examples_of(
    v: Verdict,
    actions: list[FaultAction],
    t0: int,
    keys: dict[str, str | None] | None = None,
    seen: Callable[[Any], str | None] | None = None,
) -> dict[str, list[Example]]:
    """Every checker's examples, each with its page anchor (``ex-<checker>-<i>``), readable
    times, its records' keys and (``seen``, for lost writes) what a reader sees of it."""
    out: dict[str, list[Example]] = {}
    for c in v.checkers.values():
        items = []
        for i, e in enumerate(c.examples):
            ns = e.get("time_ns")
            active = active_at(actions, ns) if ns is not None else []
            rows = evidence_rows(e["evidence"], t0, keys)
            words = seen(e["evidence"]) if seen is not None and c.name == "lost_write" else None
            if words:
                rows.insert(0, ("what a reader sees", words))
            items.append(
                Example(
                    anchor=f"ex-{c.name}-{i}",
                    kind=str(e["kind"]),
                    at=seconds(ns, t0),
                    weight=int(e.get("weight", 1)),
                    where=_where(e["evidence"]),
                    faults=_fault_list(active) if active else "none",
                    rows=rows,
                )
            )
        out[c.name] = items
    return out


def key_values(d: dict[str, Any]) -> list[tuple[str, str]]:
    """A flat mapping as rows (nested values as compact JSON)."""
    out = []
    for k, val in d.items():
        if isinstance(val, dict | list | bool):
            out.append((k, json.dumps(val, default=str, separators=(", ", ": "))))
        else:
            out.append((k, "—" if val is None else str(val)))
    return out
