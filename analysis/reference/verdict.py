"""The reference engine: the whole verdict and report of a run in plain Python, no JVM — what
the Spark pipeline produces (the same anomaly rows, counts, examples, stats and plotted series),
for histories small enough that starting Spark would cost more than judging them."""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...harness.history.run_dir import RunDir, RunDirError
from ..assemble import SEC, anomaly_results, checker_verdicts, write_verdict
from ..fault_actions import read_schedule
from ..findings import read_findings
from ..load_stats import load_stats
from ..nemesis_outcome import read_nemesis_section
from ..verdict import REFERENCE, Verdict, overall_status
from .hanging import RunFacts
from .history import ops_from_rows
from .indexes import Indexes
from .judge import judge_indexes, run_facts
from .summary import lso_series, report_series, summarize


def _read(what: str, read: Any) -> Any:
    """``read()``, a broken Parquet file refused as the Spark engine refuses it."""
    try:
        return read()
    except (OSError, pa.ArrowException) as e:
        why = " ".join(str(e).split())[:200]
        raise RunDirError(f"{what} is not readable Parquet: {why}") from e


def reference_verdict(
    run_dir: str | os.PathLike[str],
    run: RunDir,
    *,
    examples: int = 5,
    write: bool = True,
    timings: dict[str, float] | None = None,
) -> Verdict:
    """Judge ``run_dir``, already validated by ``prepare_run`` (``run``)."""
    timings = dict(timings or {})
    t0 = time.perf_counter()
    assert run.history_parquet is not None
    path = run.history_parquet
    rows = _read(str(path), lambda: pq.read_table(path).to_pylist())
    facts: RunFacts = _read(f"{run.path}/metrics.parquet", lambda: run_facts(run.path))
    summary = summarize(rows)
    ix = Indexes(ops_from_rows(rows))
    timings["load_s"] = time.perf_counter() - t0
    t = time.perf_counter()
    judged = list(judge_indexes(ix, facts).values())
    counts, ex, anomaly_tl = anomaly_results((r for j in judged for r in j.rows), examples)
    checkers = checker_verdicts(judged, counts, ex)
    timings["checkers_s"] = time.perf_counter() - t
    plots: dict[str, Any] = {}
    secs = [int(r["sec"]) for r in summary.timeline]
    if write and secs:
        span = (min(secs) * SEC, (max(secs) + 1) * SEC)
        plots = report_series(rows, ix.txns.values(), *span)
    schedule, schedule_note = read_schedule(run.path)
    nemesis, nemesis_note = read_nemesis_section(run.path, schedule)
    findings, findings_note = read_findings(run.path, schedule, run.info)
    txn_status = Counter(t.status for t in ix.txns.values())
    verdict = Verdict(
        run_dir=str(run_dir),
        status=overall_status(checkers),
        checkers=checkers,
        stats={
            "events": summary.events,
            "ops": sum(summary.type_counts.values()),
            "ops_by_type": dict(sorted(summary.type_counts.items())),
            "transactions": dict(sorted(txn_status.items())),
            **load_stats(summary.timeline, plots),
        },
        timings=timings,
        series={
            "ops": summary.timeline,
            "anomalies": anomaly_tl,
            "lso_lag": lso_series(facts.metrics) if write else {},
            **plots,
            "schedule": schedule,
        },
        faults=facts.faults,
        run=run.info,
        notes=list(run.notes) + [n for n in (schedule_note, nemesis_note, findings_note) if n],
        nemesis=nemesis,
        findings=findings,
        engine=REFERENCE,
    )
    timings["total_s"] = timings.get("validate_s", 0.0) + time.perf_counter() - t0
    verdict.timings = timings
    if write:
        write_verdict(verdict, run_dir)
    return verdict
