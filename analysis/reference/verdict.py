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

from ...rundir.run_dir import RunDir, RunDirError
from ..assemble import SEC, Judgement, anomaly_results, build_verdict, write_verdict
from ..model.history import ops_from_rows
from ..model.indexes import Indexes
from ..rules.hanging_transactions import RunFacts
from ..verdict import REFERENCE, Resembles, Verdict
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
    resembles: Resembles | None = None,
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
    results = list(judge_indexes(ix, facts).values())
    anomalies = anomaly_results((r for j in results for r in j.rows), examples)
    timings["checkers_s"] = time.perf_counter() - t
    plots: dict[str, Any] = {}
    secs = [int(r["sec"]) for r in summary.timeline]
    if secs:
        span = (min(secs) * SEC, (max(secs) + 1) * SEC)
        plots = report_series(rows, ix.txns.values(), *span)
    judged = Judgement(
        engine=REFERENCE,
        results=results,
        anomalies=anomalies,
        events=summary.events,
        type_counts=summary.type_counts,
        timeline=summary.timeline,
        transactions=Counter(t.status for t in ix.txns.values()),
        faults=facts.faults,
        lso=lso_series(facts.metrics),
        plots=plots,
        timings=timings,
    )
    verdict = build_verdict(run_dir, run, judged)
    timings["total_s"] = timings.get("validate_s", 0.0) + time.perf_counter() - t0
    if write:
        write_verdict(verdict, run_dir, resembles)
    return verdict
