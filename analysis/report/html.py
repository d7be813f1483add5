"""report.html: verdict table, anomalies with evidence, and plots (throughput and latency over
time with fault windows shaded, LSO lag per partition, anomaly timeline). One file, inline CSS
and SVG, readable offline."""

from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from typing import Any

from ..verdict import INVALID, UNKNOWN, Verdict
from .svg import chart

SEC = 1_000_000_000
CSS = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}
h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;
vertical-align:top;font-size:13px} th{background:#f3f3f3}
.valid{background:#d8f5d8}.invalid{background:#f8d0d0}.unknown{background:#eee}
pre{background:#f7f7f7;border:1px solid #ddd;padding:6px;font-size:12px;
overflow-x:auto;margin:4px 0}
.def{color:#555;font-size:12px;max-width:900px} .small{font-size:12px;color:#555}
details{margin:6px 0}
"""


def _t0(v: Verdict) -> int:
    start = v.run.get("started_ns")
    if start:
        return int(start)
    secs = [r["sec"] for r in v.series.get("ops", [])]
    return int(min(secs)) * SEC if secs else 0


def _rel(ns: int | None, t0: int) -> str:
    return "—" if ns is None else f"{(ns - t0) / SEC:.3f} s"


def _plots(v: Verdict, t0: int) -> str:
    shades = [
        (
            (f["start_ns"] - t0) / SEC,
            ((f["end_ns"] if f.get("end_ns") is not None else f["start_ns"]) - t0) / SEC,
            f"{f.get('kind')} {f.get('target')}",
        )
        for f in v.faults
    ]
    thr: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    lat_sum: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    lat_n: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for r in v.series.get("ops", []):
        x = (r["sec"] * SEC - t0) / SEC
        thr[r["type"]][x] += r["ops"]
        if r["lat_n"]:
            lat_sum[r["type"]][x] += r["lat_sum"]
            lat_n[r["type"]][x] += r["lat_n"]
    throughput = {k: sorted(d.items()) for k, d in thr.items()}
    latency = {
        k: sorted((x, lat_sum[k][x] / lat_n[k][x] / 1e6) for x in d) for k, d in lat_n.items()
    }
    parts = [
        chart(
            throughput,
            title="Throughput (operations per second, by type)",
            y_label="ops/s",
            shades=shades,
        ),
        chart(
            latency,
            title="Mean operation latency per second (ms, by type)",
            y_label="ms",
            shades=shades,
        ),
    ]
    lso = v.series.get("lso_lag") or {}
    if lso.get("series"):
        rel = {k: [(x - t0 / SEC, y) for x, y in pts] for k, pts in lso["series"].items()}
        parts.append(
            chart(
                rel,
                title=f"LSO lag per partition (high watermark - LSO; {lso['source']})",
                y_label="records",
                shades=shades,
            )
        )
    else:
        parts.append("<p class='small'>No LSO samples in this run: no LSO-lag plot.</p>")
    an: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for r in v.series.get("anomalies", []):
        an[r["checker"]][(r["sec"] * SEC - t0) / SEC] += r["n"]
    parts.append(
        chart(
            {k: sorted(d.items()) for k, d in an.items()},
            title="Anomaly timeline (count per second, by checker)",
            y_label="anomalies",
            shades=shades,
            points=True,
        )
        if an
        else "<p class='small'>Anomaly timeline: no anomalies.</p>"
    )
    return "\n".join(f"<div>{p}</div>" for p in parts)


def _evidence(ev: Any) -> str:
    return f"<pre>{escape(json.dumps(ev, indent=1, default=str))}</pre>"


def render_report(v: Verdict) -> str:
    t0 = _t0(v)
    rows = []
    for c in v.checkers.values():
        counts = ", ".join(f"{k}: {n}" for k, n in c.counts.items())
        extra = (
            f"<br><span class='small'>{escape(c.reason)}</span>"
            if c.status == UNKNOWN and c.reason
            else ""
        )
        notes = "".join(f"<br><span class='small'>{escape(n)}</span>" for n in c.notes)
        rows.append(
            f"<tr class='{c.status}'><td><a href='#{c.name}'>{escape(c.name)}</a></td>"
            f"<td>{c.status}</td><td>{c.anomaly_count}</td><td>{escape(counts)}{extra}{notes}</td></tr>"
        )
    sections = []
    for c in v.checkers.values():
        body = [
            f"<h3 id='{c.name}'>{escape(c.name)} — {c.status}</h3>",
            f"<p class='def'>{escape(c.definition)}</p>",
        ]
        if c.status == INVALID:
            for e in c.examples:
                w = e.get("weight", 1)
                weight = f" (counts {w})" if w != 1 else ""
                body.append(
                    f"<details open><summary><b>{escape(e['kind'])}</b> at "
                    f"{_rel(e.get('time_ns'), t0)}{weight}</summary>"
                    f"{_evidence(e['evidence'])}</details>"
                )
            shown = len(c.examples)
            if c.anomaly_count > shown:
                body.append(
                    f"<p class='small'>showing the first examples per kind; "
                    f"{c.anomaly_count} in total</p>"
                )
        sections.append("\n".join(body))
    faults = "".join(
        f"<tr><td>{_rel(f['start_ns'], t0)}</td><td>{_rel(f.get('end_ns'), t0)}</td>"
        f"<td>{escape(str(f.get('kind')))}</td><td>{escape(str(f.get('target')))}</td>"
        f"<td>{escape(str(f.get('detail') or ''))}</td></tr>"
        for f in v.faults
    )
    run = escape(json.dumps(v.run, indent=1, default=str))
    stats = escape(json.dumps({**v.stats, "timings_s": v.timings}, indent=1, default=str))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>txnchaos verdict: {v.status}</title>
<style>{CSS}</style></head><body>
<h1>txnchaos run verdict: <span class="{v.status}">&nbsp;{v.status.upper()}&nbsp;</span></h1>
<p class="small">{escape(v.run_dir)} — scenario {escape(str(v.run.get("scenario")))},
seed {escape(str(v.run.get("seed")))}, cluster {escape(str(v.run.get("cluster_kind")))}</p>
<h2>Verdict</h2>
<table><tr><th>checker</th><th>status</th><th>anomalies</th><th>counts / notes</th></tr>
{"".join(rows)}</table>
<h2>Over time</h2>
<p class="small">Shaded windows are faults (hover for kind and target).
Times are seconds since the run started.</p>
{_plots(v, t0)}
<h2>Anomalies with evidence</h2>
{"".join(sections)}
<h2>Faults</h2>
<table><tr><th>start</th><th>end</th><th>kind</th><th>target</th><th>detail</th></tr>{faults}</table>
<h2>Run</h2><pre>{run}</pre><h2>Statistics</h2><pre>{stats}</pre>
</body></html>
"""
