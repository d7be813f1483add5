"""report.html: the verdict in words and by checker, charts over one shared time axis with a
band per fault action, the anomalies with their evidence, and the fault table.  One file
(inline CSS and SVG, no scripts, no network), from the Jinja2 templates beside this module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from ...rundir.verdict_file import (
    cluster_line,
    engine_line,
    finding_line,
    nemesis_error_line,
    nemesis_line,
)
from ..fault_actions import group_faults
from ..load_stats import load_stats
from ..report_series import bucket_seconds
from ..verdict import Verdict
from . import charts, explain, page

SEC = 1_000_000_000
_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_report(v: Verdict) -> str:
    t0 = page.time_zero(v)
    origin, estimated = page.workload_origin(v)
    schedule = v.series.get("schedule") or []
    actions = group_faults(schedule, v.faults, origin)
    axis = page.shared_axis(v, actions, t0)
    ops = v.series.get("ops") or []
    secs = [int(r["sec"]) for r in ops]
    series_t0 = int(v.series.get("t0_ns") or (min(secs) * SEC if secs else t0))
    span = ((max(secs) + 1) * SEC if secs else series_t0) - series_t0
    bucket_s = int(v.series.get("bucket_s") or bucket_seconds(span))
    per_bucket: dict[str, dict[int, int]] = {}
    for r in v.series.get("anomalies") or []:
        b = (int(r["sec"]) * SEC - series_t0) // (bucket_s * SEC)
        d = per_bucket.setdefault(r["checker"], {})
        d[b] = d.get(b, 0) + int(r["n"])
    scenario, final_state = explain.read_run_files(v.run_dir)
    stuck = explain.stuck_partitions(final_state, explain.bootstrap_of(v.run))
    lso = {
        (p["topic"], p["partition"]): p["lso"] for p in (final_state or {}).get("partitions") or []
    }
    keys = explain.record_keys(
        Path(v.run_dir), explain.example_values(e for c in v.checkers.values() for e in c.examples)
    )
    examples = page.examples_of(v, actions, t0, keys, lambda ev: explain.visibility(ev, stuck, lso))
    lost = v.checkers.get("lost_write")
    hidden = sum(
        1
        for e in (lost.examples if lost is not None else [])
        if (explain.visibility(e["evidence"], stuck, lso) or "").startswith("hidden")
    )
    marks = [
        (c.name, e["kind"], axis.s(e["time_ns"]), ex.anchor)
        for c in v.checkers.values()
        for e, ex in zip(c.examples, examples[c.name], strict=True)
        if e.get("time_ns") is not None
    ]
    with charts.style():
        drawn = [
            charts.faults_chart(actions, axis),
            charts.throughput_chart(ops, series_t0, bucket_s, axis, actions),
            charts.users_chart(explain.workload_stats(v.run_dir), axis, actions),
            charts.latency_chart(v.series.get("latency") or [], series_t0, bucket_s, axis, actions),
            charts.lso_chart(v.series.get("lso_lag") or {}, axis, actions),
            charts.open_txns_chart(v.series.get("open_txns") or [], axis, actions),
            charts.anomalies_chart(
                list(v.checkers), per_bucket, series_t0, bucket_s, marks, axis, actions
            ),
        ]
    kinds = [a.kind for a in actions]
    fault_rows = [
        {
            "number": a.number,
            "kind": a.kind,
            "colour": charts.fault_colour(a.kind, kinds),
            "target": a.target,
            "scheduled": page.window(a.scheduled, t0),
            "applied": page.window(a.applied, t0),
            "params": a.params,
            "effect": a.effect,
            "origin": a.origin,
        }
        for a in actions
    ]
    run: dict[str, Any] = {k: v.run.get(k, "—") for k in ("scenario", "seed", "cluster_kind")}
    if v.cluster_name():  # the flavour and release that ran (apache-kafka 4.4.0)
        run["cluster_kind"] = f"{run['cluster_kind']} ({v.cluster_name()})"
    load = load_stats(ops, v.series)  # from the series: whichever engine judged the run
    stats = {k: val for k, val in v.stats.items() if k != "latency_ms"}
    stats.update({k: f"{s:.2f} s" for k, s in v.timings.items()})
    return _ENV.get_template("report.html.j2").render(
        v=v,
        run=run,
        summary=page.summary_paragraph(v, actions, t0),
        origin_estimated=estimated,
        schedule_len=len(schedule),
        axis=axis,
        charts=drawn,
        actions=actions,
        examples=examples,
        fault_rows=fault_rows,
        run_rows=page.key_values(v.run),
        stat_rows=page.key_values(stats),
        load=load,
        configuration=explain.configuration_of(v.run, scenario),
        stuck=[(sp, sp.sentence(t0)) for sp in stuck.values()],
        hidden_examples=hidden,
        findings=[
            {**f, "line": finding_line(f), "at": page.seconds(_finding_ns(f), t0)}
            for f in v.findings
        ],
        nemesis_line=nemesis_line(v.nemesis) if v.nemesis else "",
        cluster_line=cluster_line(v.cluster),
        engine_line=engine_line(v.to_json()),
        nemesis_errors=[nemesis_error_line(e) for e in (v.nemesis or {}).get("errors") or []],
    )


def _finding_ns(f: dict[str, Any]) -> int | None:
    """When a finding happened (epoch ns): a client crash's ``time_ns``, a node error's first
    ``time_s``."""
    if f.get("time_ns") is not None:
        return int(f["time_ns"])
    t = f.get("time_s")
    return int(t * 1e9) if isinstance(t, int | float) else None
