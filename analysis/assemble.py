"""From checkers' anomaly rows to the verdict, shared by both engines: counts per kind, the first
examples of each kind, anomalies per second, each checker's verdict, and the files written."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..rundir.verdict_file import REPORT_HTML, VERDICT_JSON
from .verdict import INVALID, UNKNOWN, VALID, CheckerVerdict, Resembles, Verdict, resemblance

SEC = 1_000_000_000

#: counts per (checker, kind), examples, anomalies per checker and second
AnomalyResults = tuple[dict[tuple[str, str], int], list[dict[str, Any]], list[dict[str, Any]]]


class CheckerResult(Protocol):
    """What a checker reports of one run besides its anomaly rows, whichever engine ran it
    (CheckOutput, Judged)."""

    name: str
    definition: str
    kinds: tuple[str, ...]
    unknown: str | None
    notes: list[str]
    checked: dict[str, int]


def _example_order(e: dict[str, Any]) -> tuple[Any, ...]:
    return (e["checker"], e["kind"], e["time_ns"] is None, e["time_ns"] or 0)


def sec_of(time_ns: int) -> int:
    """The second of an anomaly time as the Spark job computes it (a double division)."""
    return math.floor(float(time_ns) / SEC)


def anomaly_results(rows: Iterable[dict[str, Any]], n_examples: int) -> AnomalyResults:
    """What the Spark pipeline's anomaly job computes over checkers' frames, from their rows:
    weight per (checker, kind), the first ``n_examples`` rows per kind by time (nulls last),
    and weight per (checker, second)."""
    counts: dict[tuple[str, str], int] = {}
    by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
    per_sec: dict[tuple[str, int], int] = {}
    for r in rows:
        key = (r["checker"], r["kind"])
        counts[key] = counts.get(key, 0) + int(r["weight"])
        by_kind.setdefault(key, []).append(r)
        if r["time_ns"] is not None:
            s = (r["checker"], sec_of(r["time_ns"]))
            per_sec[s] = per_sec.get(s, 0) + int(r["weight"])
    examples = []
    for found in by_kind.values():
        found.sort(key=lambda r: (r["time_ns"] is None, r["time_ns"] or 0))
        examples += [
            {k: r[k] for k in ("checker", "kind", "time_ns", "weight", "evidence")}
            for r in found[:n_examples]
        ]
    examples.sort(key=_example_order)
    timeline = [{"checker": c, "sec": s, "n": n} for (c, s), n in sorted(per_sec.items())]
    return counts, examples, timeline


def merge(results: Iterable[AnomalyResults], n_examples: int | None = None) -> AnomalyResults:
    """One :func:`anomaly_results` of several: counts and anomalies per second added, examples
    kept to the first ``n_examples`` per kind (all when None: disjoint sets of checkers)."""
    counts: dict[tuple[str, str], int] = {}
    examples: list[dict[str, Any]] = []
    per_sec: dict[tuple[str, int], int] = {}
    for part_counts, part_examples, part_timeline in results:
        for key, n in part_counts.items():
            counts[key] = counts.get(key, 0) + n
        examples += part_examples
        for x in part_timeline:
            per_sec[(x["checker"], x["sec"])] = per_sec.get((x["checker"], x["sec"]), 0) + x["n"]
    examples.sort(key=_example_order)
    if n_examples is not None:
        shown: dict[tuple[str, str], int] = {}
        kept = []
        for e in examples:
            key = (e["checker"], e["kind"])
            shown[key] = shown.get(key, 0) + 1
            if shown[key] <= n_examples:
                kept.append(e)
        examples = kept
    timeline = [{"checker": c, "sec": s, "n": n} for (c, s), n in sorted(per_sec.items())]
    return counts, examples, timeline


def checker_verdicts(
    outputs: Sequence[CheckerResult],
    counts: dict[tuple[str, str], int],
    examples: list[dict[str, Any]],
) -> dict[str, CheckerVerdict]:
    """Each checker's verdict from the anomaly results of every checker's rows."""
    result: dict[str, CheckerVerdict] = {}
    for o in outputs:
        kinds = {k: counts.get((o.name, k), 0) for k in o.kinds}
        for (name, kind), n in counts.items():
            if name == o.name and kind not in kinds:
                kinds[kind] = n
        ex = [e for e in examples if e["checker"] == o.name]
        ex.sort(key=lambda e: (e["kind"], e["time_ns"] is None, e["time_ns"] or 0))
        total = sum(kinds.values())
        status = INVALID if total else (UNKNOWN if o.unknown else VALID)
        result[o.name] = CheckerVerdict(
            name=o.name,
            status=status,
            definition=o.definition,
            counts=kinds,
            anomaly_count=total,
            examples=[{k: v for k, v in e.items() if k != "checker"} for e in ex],
            reason=o.unknown,
            notes=o.notes,
            checked=o.checked,
        )
    return result


def write_verdict(
    verdict: Verdict, run_dir: str | os.PathLike[str], resembles: Resembles | None = None
) -> None:
    """verdict.json and report.html into the run directory (an invalid verdict says first
    which known bugs it resembles)."""
    from .report import render_report

    verdict.resembles = resemblance(verdict, resembles)
    root = Path(run_dir)
    verdict.write(root / VERDICT_JSON)
    (root / REPORT_HTML).write_text(render_report(verdict), encoding="utf-8")
