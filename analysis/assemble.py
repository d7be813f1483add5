"""The one verdict builder, for both engines: from what an engine found in a run (a
:class:`Judgement`: each rule's result and the anomaly rows' counts, examples and times, the
summary pass, the plotted series) to the :class:`Verdict` — each checker's verdict with its
rule's definition, the run's stats, the nemesis section, the findings (client crashes), what
was judged — and the files
written (verdict.json, report.html)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..rundir.run_dir import RunDir
from ..rundir.verdict_file import REPORT_HTML, VERDICT_JSON, judged_cluster
from .fault_actions import read_schedule
from .findings import read_findings
from .load_stats import load_stats
from .nemesis_outcome import read_nemesis_section
from .rules.registry import by_name, definition
from .verdict import (
    INVALID,
    UNKNOWN,
    VALID,
    CheckerVerdict,
    Resembles,
    Verdict,
    overall_status,
    resemblance,
)

SEC = 1_000_000_000

#: counts per (checker, kind), examples, anomalies per checker and second
AnomalyResults = tuple[dict[tuple[str, str], int], list[dict[str, Any]], list[dict[str, Any]]]


class CheckerResult(Protocol):
    """What a checker reports of one run besides its anomaly rows, whichever engine ran it
    (the Spark implementation's CheckOutput, the rule's Judged)."""

    name: str
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
    """Each checker's verdict from the anomaly results of every checker's rows; its definition
    is its rule's (rules/registry.py)."""
    rules = by_name()
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
            definition=definition(rules[o.name]),
            counts=kinds,
            anomaly_count=total,
            examples=[{k: v for k, v in e.items() if k != "checker"} for e in ex],
            reason=o.unknown,
            notes=o.notes,
            checked=o.checked,
        )
    return result


@dataclass
class Judgement:
    """What an engine found in a run, before it is a verdict: each rule's result (in the
    registry's order) and the anomaly results of their rows; the summary pass (events, ops per
    type, ops per second, transactions per status); the report's series; the faults; timings."""

    engine: str
    results: Sequence[CheckerResult]
    anomalies: AnomalyResults
    events: int
    type_counts: Mapping[str, int]
    timeline: list[dict[str, Any]]
    transactions: Mapping[str, int]
    faults: list[dict[str, Any]]
    #: plotted series beside the ops and anomalies per second: the LSO lag, latencies, ...
    lso: dict[str, Any] = field(default_factory=dict)
    plots: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    #: the Spark application that judged (None: the reference engine)
    spark: dict[str, Any] | None = None


def build_verdict(run_dir: str | os.PathLike[str], run: RunDir, judged: Judgement) -> Verdict:
    """The verdict of ``run`` (validated by ``prepare_run``) from what an engine found."""
    counts, examples, anomaly_timeline = judged.anomalies
    checkers = checker_verdicts(judged.results, counts, examples)
    schedule, schedule_note = read_schedule(run.path)
    nemesis, nemesis_note = read_nemesis_section(run.path, schedule)
    findings, findings_note = read_findings(run.path, schedule, run.info)
    return Verdict(
        run_dir=str(run_dir),
        status=overall_status(checkers),
        checkers=checkers,
        stats={
            "events": judged.events,
            "ops": sum(judged.type_counts.values()),
            "ops_by_type": dict(sorted(judged.type_counts.items())),
            "transactions": dict(sorted(judged.transactions.items())),
            **load_stats(judged.timeline, judged.plots),
        },
        timings=judged.timings,
        series={
            "ops": judged.timeline,
            "anomalies": anomaly_timeline,
            "lso_lag": judged.lso,
            **judged.plots,
            "schedule": schedule,
        },
        faults=judged.faults,
        run=run.info,
        notes=list(run.notes) + [n for n in (schedule_note, nemesis_note, findings_note) if n],
        nemesis=nemesis,
        findings=findings,
        engine=judged.engine,
        cluster=judged_cluster(run.info),
        spark=judged.spark,
    )


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
