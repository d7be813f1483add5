"""The analysis pipeline: run directory -> verdict.json + report.html.

``analyze(run_dir, master=None) -> Verdict`` does the work; ``txnchaos analyze`` and ``txnchaos
run`` reach it through analyze.py, which judges small histories with the plain-Python reference
engine instead (``--engine``).

Cost model: the checkers only *describe* Spark DataFrames of anomaly rows; the pipeline unions
them and runs one job to materialise the (normally empty) anomaly set, then a few tiny jobs for
counts, examples and plot data.  Shared projections (see projections.py) mean each history
column is shuffled a handful of times in total, not once per checker.

Independent work runs at once (engine/parallel.py): the summary beside the report's LSO series; the
two shuffles of the history (by value, by stream) beside the checkers that read neither; then the
other checkers in groups by what they read, each with its own anomaly job (the schedule is
derived from the checkers' declarations: checkers/registry.py).  One thread's
planning and stage tails then overlap another's tasks.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial, reduce
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ...rundir.run_dir import RunDirError
from ...rundir.schema import MetricName
from ..assemble import (
    AnomalyResults,
    Judgement,
    anomaly_results,
    build_verdict,
    merge,
    write_verdict,
)
from ..load import prepare_run, unreadable_file
from ..report_series import MAX_PLOT_PARTITIONS, MAX_PLOT_POINTS
from ..verdict import SPARK, Resembles, Verdict
from . import (
    class_archive,
    get_session,
    history_rows,
    run_parallel,
    tune_session,
)
from .checkers.base import CheckOutput, Exact, Place
from .checkers.context import CheckContext
from .checkers.protocol import Checker
from .checkers.schedule import CHECKERS, schedule
from .load import load_run
from .projections import Projections
from .report_series import report_series
from .session import describe
from .summary import Summary, summarize

#: what runs when: derived from what each registered checker reads (checkers/registry.py)
SCHEDULE = schedule(CHECKERS)
SEC = 1_000_000_000


def _anomaly_results(frames: list[DataFrame], n_examples: int) -> AnomalyResults:
    """Counts per (checker, kind), the first ``n_examples`` per kind, and anomalies per checker
    and second, from ONE Spark job over the union of every checker's anomaly frames."""
    if not frames:
        return {}, [], []
    # a union has as many partitions as all its inputs together: coalesce so the (normally
    # empty) anomaly rows are not shipped through dozens of tiny tasks
    cores = max(1, frames[0].sparkSession.sparkContext.defaultParallelism)
    # positional union (every frame has the anomaly columns in order): cheaper to analyse
    union = reduce(DataFrame.union, frames).coalesce(cores)
    u = union.withColumn("sec", F.floor(F.col("time_ns") / SEC)).repartition("checker")
    by_kind = Window.partitionBy("checker", "kind")
    by_sec = Window.partitionBy("checker", "sec")
    first = F.col("time_ns").asc_nulls_last()
    u = u.select(
        "*",
        F.row_number().over(by_kind.orderBy(first)).alias("rn"),
        F.sum("weight").over(by_kind).alias("kind_n"),
        F.row_number().over(by_sec.orderBy(first)).alias("rn_sec"),
        F.sum("weight").over(by_sec).alias("sec_n"),
    )
    rows = (
        u.filter((F.col("rn") <= n_examples) | (F.col("rn_sec") == 1))
        .select(
            "checker",
            "kind",
            "time_ns",
            "weight",
            F.when(F.col("rn") <= n_examples, F.col("evidence")).alias("evidence"),
            (F.col("rn") <= n_examples).alias("example"),
            "kind_n",
            F.when(F.col("rn_sec") == 1, F.col("sec")).alias("sec"),
            "sec_n",
        )
        .collect()
    )
    counts: dict[tuple[str, str], int] = {}
    examples: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    for r in rows:
        counts[(r["checker"], r["kind"])] = int(r["kind_n"])
        if r["example"]:
            examples.append(
                {
                    "checker": r["checker"],
                    "kind": r["kind"],
                    "time_ns": r["time_ns"],
                    "weight": r["weight"],
                    "evidence": json.loads(r["evidence"]),
                }
            )
        if r["sec"] is not None:
            timeline.append({"checker": r["checker"], "sec": r["sec"], "n": int(r["sec_n"])})
    examples.sort(key=lambda e: (e["checker"], e["kind"], e["time_ns"] is None, e["time_ns"] or 0))
    return counts, examples, timeline


def _lso_series(data: Any) -> dict[str, Any]:
    m = data.metrics
    if m is None:
        return {}
    lso_n, hw_n = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value
    harness = m.filter(F.col("name").isin(lso_n, hw_n) & F.col("topic").isNotNull())
    lag = (
        harness.groupBy("topic", "partition", "time_ns")
        .agg(
            (
                F.max(F.when(F.col("name") == hw_n, F.col("value")))
                - F.max(F.when(F.col("name") == lso_n, F.col("value")))
            ).alias("lag")
        )
        .filter(F.col("lag").isNotNull())
    )
    source = "harness LSO/high-watermark samples"
    bounds = lag.agg(F.min("time_ns"), F.max("time_ns"), F.count(F.lit(1))).collect()[0]
    if not bounds[2]:
        lag = (
            m.filter(
                (F.col("name") == MetricName.LAST_STABLE_OFFSET_LAG.value)
                & F.col("topic").isNotNull()
            )
            .groupBy("topic", "partition", "time_ns")
            .agg(F.max("value").alias("lag"))
        )
        source = "LastStableOffsetLag metric"
        bounds = lag.agg(F.min("time_ns"), F.max("time_ns"), F.count(F.lit(1))).collect()[0]
        if not bounds[2]:
            return {}
    t0, t1 = bounds[0], bounds[1]
    bucket = max(SEC, (t1 - t0) // MAX_PLOT_POINTS + 1)
    top = (
        lag.groupBy("topic", "partition")
        .agg(F.max("lag").alias("m"))
        .orderBy(F.col("m").desc(), "topic", "partition")
        .limit(MAX_PLOT_PARTITIONS)
        .collect()
    )
    keys = [(r["topic"], r["partition"]) for r in top]
    cond = reduce(
        lambda a, b: a | b,
        [(F.col("topic") == t) & (F.col("partition") == p) for t, p in keys],
    )
    pts = (
        lag.filter(cond)
        .groupBy("topic", "partition", F.floor((F.col("time_ns") - F.lit(t0)) / bucket).alias("b"))
        .agg(F.max("lag").alias("lag"))
        .collect()
    )
    series: dict[str, list[tuple[float, float]]] = {}
    for r in pts:
        series.setdefault(f"{r['topic']}/{r['partition']}", []).append(
            ((t0 + r["b"] * bucket) / SEC, float(r["lag"]))
        )
    return {"source": source, "series": {k: sorted(v) for k, v in series.items()}}


def _refine(ctx: CheckContext, outputs: list[CheckOutput], examples: list[dict[str, Any]]) -> None:
    """Fill in the LATER evidence fields of the examples from their exact records (one small
    Spark job over the few values and places the examples name)."""
    todo = []
    values: set[str] = set()
    places: set[Place] = set()
    for o in outputs:
        ex = [e for e in examples if e["checker"] == o.name]
        if o.refine is None or not ex:
            continue
        v, p = o.refine.needs(ctx, ex)
        values |= v
        places |= p
        todo.append((o.refine, ex))
    if not todo:
        return
    exact = Exact()
    if values:
        ev = ctx.proj.exact_values(sorted(values))
        for r in ev.select(
            "value", *(F.to_json(c).alias(c) for c in ("wr", "first_read", "loc_min", "loc_max"))
        ).collect():
            exact.values[r["value"]] = {
                c: json.loads(r[c]) if r[c] is not None else None
                for c in ("wr", "first_read", "loc_min", "loc_max")
            }
    if places:
        eo = ctx.proj.exact_offsets(sorted(places))
        for r in eo.select(
            "topic", "partition", "offset", *(F.to_json(c).alias(c) for c in ("v_min", "v_max"))
        ).collect():
            exact.places[(r["topic"], r["partition"], r["offset"])] = {
                c: json.loads(r[c]) for c in ("v_min", "v_max")
            }
    for refine, ex in todo:
        for e in ex:
            refine.apply(e["evidence"], exact)


def analyze(
    run_dir: str | os.PathLike[str],
    master: str | None = None,
    *,
    spark: SparkSession | None = None,
    examples: int = 5,
    write: bool = True,
    input_uri: str | None = None,
    resembles: Resembles | None = None,
    session: dict[str, Any] | None = None,
    archive: bool = True,
) -> Verdict:
    """Judge one run directory (its Parquet files read by the executors from ``input_uri``, a
    copy of it, if given: see input_uri.py) on ``spark`` (else a session started for it, or
    the active one). ``session``: how the given session started (``session``,
    ``session_start_s``, ``session_wait_s``: the time this analysis waited for it), for the
    verdict. Raises :class:`RunDirError` if the run directory cannot be read (checked before
    Spark starts)."""
    timings: dict[str, float] = {}
    waited = float((session or {}).get("session_wait_s") or 0.0)
    t0 = time.perf_counter() - waited
    run = prepare_run(run_dir)
    timings["validate_s"] = time.perf_counter() - t0 - waited
    t = time.perf_counter()
    rows = history_rows(run)
    spark = spark or get_session(master, history_rows=rows)
    timings["spark_start_s"] = time.perf_counter() - t + waited
    started = session or {
        "session": "started for this analysis",
        "session_start_s": round(timings["spark_start_s"], 2),
    }
    t = time.perf_counter()
    data = load_run(spark, run, input_uri)
    tune_session(spark, rows)

    def summary_job() -> Summary:
        try:
            with _job(spark, "summary"):
                return summarize(data.history)
        except PySparkException as e:
            why = unreadable_file(e) or " ".join(str(e).split())[:300]
            raise RunDirError(f"history of {run_dir} could not be read: {why}") from e

    def lso_job() -> dict[str, Any]:
        with _job(spark, "summaries"):
            return _lso_series(data)

    # the report's LSO series reads the metrics only: it runs beside the summary
    summary, lso = run_parallel(spark, summary_job, lso_job)
    timings["load_s"] = time.perf_counter() - t
    type_counts = summary.type_counts
    timeline = summary.timeline
    events = summary.events
    proj = Projections(data, summary)
    ctx = CheckContext(data, proj, type_counts, examples)
    t = time.perf_counter()
    done: dict[str, CheckOutput] = {}

    plots: dict[str, Any] = {}

    def side_job() -> dict[str, int]:
        for mod in SCHEDULE.side:
            done[mod.NAME] = _check(spark, mod, ctx, timings)
        with _job(spark, "summaries"):
            status = {
                r["status"]: int(r["count"]) for r in proj.txns.groupBy("status").count().collect()
            }
        secs = [int(r["sec"]) for r in timeline]
        if secs:  # the report's latency quantiles and open transactions (and the stats')
            tr = time.perf_counter()
            with _job(spark, "report series"):
                span = (min(secs) * SEC, (max(secs) + 1) * SEC)
                plots.update(report_series(data.history, proj.txns, *span))
            timings["report_series_s"] = time.perf_counter() - tr
        return status

    def by_value() -> None:
        if SCHEDULE.by_value:
            with _job(spark, "projections by value"):
                proj.materialise(proj.values, proj.offsets)

    def by_stream() -> None:
        if SCHEDULE.by_stream:
            with _job(spark, "projections by stream"):
                proj.materialise(proj.stream, proj.spans)

    # the two shuffles of the history, and the checkers that read little but metrics and the
    # final state, at once (run_parallel); the other checkers then mostly read kept projections
    proj.prepare()
    txn_status, _, _ = run_parallel(spark, side_job, by_value, by_stream)
    timings["projections_s"] = time.perf_counter() - t

    def judge(group: tuple[Checker, ...]) -> AnomalyResults:
        for mod in group:
            done[mod.NAME] = _check(spark, mod, ctx, timings)
        with _job(spark, "anomalies"):
            return _anomaly_results([f for mod in group for f in done[mod.NAME].frames], examples)

    # the other checkers in their groups at once, each with its own anomaly job; the side
    # checkers (already run) get one too when they described frames rather than rows
    tc = time.perf_counter()
    with _adaptive(spark):
        side_frames = [f for m in SCHEDULE.side for f in done[m.NAME].frames]
        groups = [partial(judge, g) for g in SCHEDULE.groups]
        groups.append(partial(_side_anomalies, spark, side_frames, examples))
        counts, ex, anomaly_tl = merge(run_parallel(spark, *groups))
    timings["anomaly_job_s"] = time.perf_counter() - tc
    outputs = [done[mod.NAME] for mod in CHECKERS]
    tc = time.perf_counter()
    with _job(spark, "evidence"):
        _refine(ctx, outputs, ex)
    timings["evidence_s"] = time.perf_counter() - tc
    timings["checkers_s"] = time.perf_counter() - t
    proj.release()
    # rows the checkers over small inputs returned themselves, counted as the frames' are
    direct = anomaly_results([r for o in outputs for r in o.rows], examples)
    judged = Judgement(
        engine=SPARK,
        results=outputs,
        anomalies=merge([(counts, ex, anomaly_tl), direct], examples),
        events=events,
        type_counts=type_counts,
        timeline=timeline,
        transactions=txn_status,
        faults=data.faults,
        lso=lso,
        plots=plots,
        timings=timings,
        spark={**describe(spark), **started},
    )
    verdict = build_verdict(run_dir, run, judged)
    timings["total_s"] = time.perf_counter() - t0
    if archive:  # a session's warm-up (warm_up.py) judges a scratch run: not one to build from
        class_archive.build_later(run_dir)
    if write:
        write_verdict(verdict, run_dir, resembles)
    return verdict


def _side_anomalies(spark: SparkSession, frames: list[DataFrame], examples: int) -> AnomalyResults:
    """The anomaly job of the side checkers' frames (none: nothing to run)."""
    if not frames:
        return {}, [], []
    with _job(spark, "anomalies"):
        return _anomaly_results(frames, examples)


def _check(
    spark: SparkSession, mod: Checker, ctx: CheckContext, timings: dict[str, float]
) -> CheckOutput:
    """One checker's output (its frames described, its small jobs run), timed."""
    t = time.perf_counter()
    with _job(spark, f"checker {mod.NAME}"):
        out = mod.check(ctx)
    timings[f"checker_{mod.NAME}_s"] = time.perf_counter() - t
    return out


@contextmanager
def _adaptive(spark: SparkSession) -> Iterator[None]:
    """Adaptive query execution for the queries run inside (sessions start without it: it
    re-plans every stage, which short jobs do not earn back).  The anomaly queries earn it:
    most join a kept projection of millions of rows to a small broadcast side that, in a valid
    run, is empty, and adaptive execution then drops the join and the scan below it."""
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key) or "false"
    spark.conf.set(key, "true")
    try:
        yield
    finally:
        spark.conf.set(key, before)


@contextmanager
def _job(spark: SparkSession, what: str) -> Iterator[None]:
    """Name the Spark jobs started inside (the UI is off; names show in logs and listeners)."""
    sc = spark.sparkContext
    sc.setJobDescription(f"txnchaos: {what}")
    try:
        yield
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]


def main_analyze(run_dir: str | os.PathLike[str], master: str | None = None) -> int:
    """``txnchaos analyze RUN_DIR --engine spark``: see :func:`analysis.analyze.main_analyze`."""
    from ..analyze import main_analyze as main

    return main(run_dir, master, SPARK)
