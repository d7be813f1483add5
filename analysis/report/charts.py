"""The report's charts, drawn with matplotlib and inlined as SVG (text kept as text).

Every chart has the same width, margins and x range (seconds since the run started), so the
fault bands — one per nemesis action, coloured by fault kind, linked to its row of the fault
table — line up from chart to chart.  Series are drawn as points joined only between adjacent
time buckets: a gap stays a gap.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..fault_actions import FaultAction

#: inches: every chart has this width and these margins, so their x axes line up
WIDTH, LEFT, RIGHT = 11.0, 2.0, 1.9
TOP, BOTTOM = 0.3, 0.45
#: one colour per fault kind (the nemesis's kinds first; others take the spare colours)
FAULT_COLOURS = {
    "kill": "#d62728",
    "pause": "#ff7f0e",
    "restart": "#8c564b",
    "delay": "#1f77b4",
    "drop_request": "#9467bd",
    "drop_response": "#e377c2",
    "reorder": "#2ca02c",
    "duplicate": "#7f7f7f",
    "blackhole": "#111111",
    "reset": "#bcbd22",
    "throttle": "#17becf",
    "crash_producer": "#393b79",
    "crash_consumer": "#637939",
}
SPARE_FAULT_COLOURS = ("#843c39", "#7b4173", "#5254a3", "#8c6d31", "#3182bd")
#: one colour per operation type (EventType), all distinct
OP_COLOURS = {
    "init": "#1f77b4",
    "begin": "#ff7f0e",
    "send": "#2ca02c",
    "send_offsets": "#d62728",
    "commit": "#9467bd",
    "abort": "#8c564b",
    "poll": "#e377c2",
    "assign": "#7f7f7f",
    "revoke": "#bcbd22",
    "seek": "#17becf",
    "commit_offsets": "#393b79",
    "start": "#637939",
    "stop": "#843c39",
    "final_read": "#7b4173",
}
SPARE_COLOURS = ("#e7ba52", "#3182bd", "#31a354", "#756bb1", "#636363", "#e6550d")
SERIES_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
)
#: outcome -> (marker, filled): ok points joined by steps, fail and info points only
OUTCOME_STYLE = {"ok": ("o", True), "fail": ("x", True), "info": ("^", False)}
QUANTILE_STYLE = {"p50_ms": ("-", "p50"), "p95_ms": ("--", "p95"), "p99_ms": (":", "p99")}
BAND_ALPHA = 0.22
#: quantiles under this are client-local calls (begin, seek): drawn, they would only stretch
#: the log scale down by decades
MIN_LATENCY_MS = 1e-3
SEC = 1_000_000_000


def fault_colour(kind: str, kinds: Sequence[str]) -> str:
    if kind in FAULT_COLOURS:
        return FAULT_COLOURS[kind]
    others = sorted(k for k in set(kinds) if k not in FAULT_COLOURS)
    return SPARE_FAULT_COLOURS[others.index(kind) % len(SPARE_FAULT_COLOURS)]


def op_colour(op: str, ops: Sequence[str]) -> str:
    if op in OP_COLOURS:
        return OP_COLOURS[op]
    others = sorted(k for k in set(ops) if k not in OP_COLOURS)
    return SPARE_COLOURS[others.index(op) % len(SPARE_COLOURS)]


@dataclass
class Chart:
    """One rendered chart: its id (prefix of its SVG ids), heading, SVG and x range."""

    id: str
    title: str
    caption: str
    svg: str
    xlim: tuple[float, float]
    bands: int


@dataclass
class Axis:
    """The shared time axis: seconds since ``t0_ns``, drawn over [lo, hi]."""

    t0_ns: int
    lo: float
    hi: float

    def s(self, ns: int | float) -> float:
        return (ns - self.t0_ns) / 1e9


def _figure(height: float) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(WIDTH, height))
    fig.subplots_adjust(
        left=LEFT / WIDTH,
        right=1 - RIGHT / WIDTH,
        top=1 - TOP / height,
        bottom=BOTTOM / height,
    )
    ax = fig.add_subplot()
    ax.grid(True, which="major", color="#e4e4e4", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


_SVG_HEAD = re.compile(r"^.*?(<svg\b)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)


#: the charts' look: one short font list (every text element carries it), text kept as text
STYLE: dict[Any, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial"],
    "svg.fonttype": "none",
}


def style() -> Any:
    """The context every chart is drawn in (fonts are fixed when a text is made)."""
    return mpl.rc_context(STYLE)


def _svg(fig: Figure, chart_id: str) -> str:
    """The figure as an inline <svg> element (no XML prolog; ids salted per chart, so the
    charts' ids do not collide in one page, and stable from run to run)."""
    buf = io.StringIO()
    with mpl.rc_context({**STYLE, "svg.hashsalt": f"txnchaos-{chart_id}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = _SVG_HEAD.sub(r"\1", buf.getvalue(), count=1)
    text = _METADATA.sub("", text, count=1)  # an RDF block naming matplotlib: no use inline
    return text.replace("<svg ", f'<svg class="chart-svg" aria-labelledby="{chart_id}-title" ', 1)


def _bands(ax: Axes, chart_id: str, actions: list[FaultAction], axis: Axis) -> int:
    kinds = [a.kind for a in actions]
    for a in actions:
        lo, hi = (axis.s(x) for x in a.window)
        colour = fault_colour(a.kind, kinds)
        if hi - lo < (axis.hi - axis.lo) / 1500:  # an instant: a line, not an invisible span
            art: Any = ax.axvline(lo, color=colour, alpha=0.6, lw=1.2, zorder=0)
        else:
            art = ax.axvspan(lo, hi, color=colour, alpha=BAND_ALPHA, lw=0, zorder=0)
        art.set_gid(f"{chart_id}-band-{a.number}")
        art.set_url(f"#fault-{a.number}")
    return len(actions)


def _legend(ax: Axes, groups: list[tuple[str, list[Any]]], *, gid: str) -> Any:
    """One legend right of the axes: each group under its bold heading."""
    handles: list[Any] = []
    headings = []
    for title, items in groups:
        headings.append(len(handles))
        handles.append(Line2D([], [], ls="none", label=title))
        handles += items
    leg = ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        fontsize=8,
        borderaxespad=0,
        handlelength=2.2,
        labelspacing=0.35,
    )
    texts = leg.get_texts()
    for i in headings:
        texts[i].set_fontweight("bold")
    leg.set_gid(gid)
    return leg


def _finish(
    fig: Figure, ax: Axes, chart: str, title: str, caption: str, axis: Axis, bands: int
) -> Chart:
    ax.set_xlim(axis.lo, axis.hi)
    ax.set_xlabel("seconds since the run started", fontsize=8.5)
    ax.tick_params(labelsize=8)
    return Chart(chart, title, caption, _svg(fig, chart), (axis.lo, axis.hi), bands)


def _gapped(points: dict[int, float], width: float, x0: float) -> tuple[list[float], list[float]]:
    """(x, y) with NaN between buckets that are not adjacent: a line never bridges a gap."""
    xs: list[float] = []
    ys: list[float] = []
    prev: int | None = None
    for b in sorted(points):
        if prev is not None and b != prev + 1:
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append(x0 + (b + 0.5) * width)
        ys.append(points[b])
        prev = b
    return xs, ys


def _short(label: str, n: int = 34) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _isolated(xs: list[float]) -> list[int]:
    """Indices of the points no line reaches (NaN on both sides, or an end)."""
    out = []
    for i, x in enumerate(xs):
        if math.isnan(x):
            continue
        left = i > 0 and not math.isnan(xs[i - 1])
        right = i + 1 < len(xs) and not math.isnan(xs[i + 1])
        if not left and not right:
            out.append(i)
    return out


def _no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#777")
    ax.set_yticks([])


# -- the charts ---------------------------------------------------------------------------


def faults_chart(actions: list[FaultAction], axis: Axis) -> Chart:
    """The nemesis: one lane per fault kind and target; each action a hatched bar (what the
    schedule asked for) above a solid one (what the fault log says was applied)."""
    lanes: list[tuple[str, str]] = []
    for a in actions:
        if (a.kind, a.target) not in lanes:
            lanes.append((a.kind, a.target))
    lanes.sort()
    fig, ax = _figure(0.95 + 0.36 * max(1, len(lanes)))
    kinds = [a.kind for a in actions]
    min_w = (axis.hi - axis.lo) / 400
    for a in actions:
        y = lanes.index((a.kind, a.target))
        colour = fault_colour(a.kind, kinds)
        url = f"#fault-{a.number}"
        if a.scheduled is not None:
            lo, hi = (axis.s(x) for x in a.scheduled)
            bar = ax.barh(
                y + 0.2, max(hi - lo, min_w), left=lo, height=0.36, color="none",
                edgecolor=colour, hatch="////", lw=0.8,
            )[0]  # fmt: skip
            bar.set_gid(f"faults-scheduled-{a.number}")
            bar.set_url(url)
        if a.applied is not None:
            lo, hi = (axis.s(x) for x in a.applied)
            bar = ax.barh(y - 0.2, max(hi - lo, min_w), left=lo, height=0.36, color=colour)[0]
            bar.set_gid(f"faults-applied-{a.number}")
            bar.set_url(url)
        if len(actions) <= 60:
            ends = [x for w in (a.scheduled, a.applied) if w for x in w]
            ax.annotate(
                f"#{a.number}",
                (max(axis.s(max(ends)), axis.s(min(ends)) + min_w), y),
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=7,
                color="#333",
                va="center",
                url=url,
            )
    ax.set_yticks(range(len(lanes)), [f"{k}\n{_short(t, 30)}" for k, t in lanes], fontsize=7.5)
    ax.set_ylim(-0.6, max(1, len(lanes)) - 0.25)
    ax.invert_yaxis()
    ax.grid(False, axis="y")
    if not actions:
        _no_data(ax, "no faults: nothing was scheduled and the fault log is empty")
    seen = sorted(set(kinds), key=kinds.index)
    handles: list[Any] = [Patch(color=fault_colour(k, kinds), label=k) for k in seen]
    handles += [
        Patch(facecolor="none", edgecolor="#444", hatch="////", label="scheduled"),
        Patch(color="#444", label="applied (fault log)"),
    ]
    _legend(ax, [("fault kind", handles[:-2]), ("bars", handles[-2:])], gid="faults-legend")
    return _finish(
        fig,
        ax,
        "faults",
        "Faults: the nemesis schedule and what was applied",
        "One bar pair per scheduled action (hatched: the schedule's window; solid: first to last "
        "fault-log record it caused); click a bar for its row in the fault table.",
        axis,
        len(actions),
    )


def throughput_chart(
    timeline: list[dict[str, Any]],
    origin_ns: int,
    bucket_s: int,
    axis: Axis,
    actions: list[FaultAction],
) -> Chart:
    """Operations per second per type and outcome, per bucket of ``bucket_s`` seconds from
    ``origin_ns``."""
    fig, ax = _figure(3.6)
    bands = _bands(ax, "throughput", actions, axis)
    x0 = axis.s(origin_ns)
    counts: dict[tuple[str, str], dict[int, float]] = {}
    for r in timeline:
        if not r.get("ops"):
            continue
        b = (int(r["sec"]) * SEC - origin_ns) // (bucket_s * SEC)
        d = counts.setdefault((r["type"], r["outcome"] or "ok"), {})
        d[b] = d.get(b, 0.0) + r["ops"] / bucket_s
    types = sorted(
        {t for t, _ in counts},
        key=lambda t: (list(OP_COLOURS).index(t) if t in OP_COLOURS else 99, t),
    )
    for (typ, outcome), pts in sorted(counts.items()):
        marker, filled = OUTCOME_STYLE.get(outcome, ("d", True))
        colour = op_colour(typ, types)
        xs, ys = _gapped(pts, bucket_s, x0)
        ax.plot(
            xs,
            ys,
            drawstyle="steps-mid" if outcome == "ok" else "default",
            ls="-" if outcome == "ok" else "none",
            lw=1.0,
            color=colour,
            marker=marker,
            # a line shows the joined points: only a point with no neighbour gets a marker
            markevery=_isolated(xs) if outcome == "ok" else None,
            ms=3 if outcome == "ok" else 4.5,
            mfc=colour if filled else "none",
            mew=0.9,
            gid=f"throughput-{typ}-{outcome}",
        )
    if counts:
        ax.set_yscale("log")
        ax.set_ylabel("operations / s (log)", fontsize=8.5)
        outcomes = sorted(
            {o for _, o in counts},
            key=lambda o: list(OUTCOME_STYLE).index(o) if o in OUTCOME_STYLE else 9,
        )
        style = [
            Line2D([], [], color="#444", ls="-" if o == "ok" else "none",
                   marker=OUTCOME_STYLE.get(o, ("d", True))[0],
                   mfc="#444" if OUTCOME_STYLE.get(o, ("d", True))[1] else "none", label=o)
            for o in outcomes
        ]  # fmt: skip
        kinds = [Line2D([], [], color=op_colour(t, types), lw=2, label=t) for t in types]
        _legend(ax, [("operation type", kinds), ("outcome", style)], gid="throughput-legend")
    else:
        _no_data(ax, "no operations")
    per = "per second" if bucket_s == 1 else f"averaged over {bucket_s}-second buckets"
    return _finish(
        fig,
        ax,
        "throughput",
        "Throughput by operation type and outcome",
        f"Operations {per}, by the second they were invoked; a line joins adjacent buckets "
        "only. Shaded: faults (colour = kind).",
        axis,
        bands,
    )


def latency_chart(
    rows: list[dict[str, Any]],
    origin_ns: int,
    bucket_s: int,
    axis: Axis,
    actions: list[FaultAction],
) -> Chart:
    """p50 / p95 / p99 latency per operation type (log scale), per bucket from
    ``origin_ns``."""
    fig, ax = _figure(3.6)
    bands = _bands(ax, "latency", actions, axis)
    x0 = axis.s(origin_ns)
    series: dict[tuple[str, str], dict[int, float]] = {}
    for r in rows:
        b = (int(r["t_ns"]) - origin_ns) // (bucket_s * SEC)
        for q in QUANTILE_STYLE:
            if float(r[q]) >= MIN_LATENCY_MS:
                series.setdefault((r["type"], q), {})[b] = float(r[q])
    types = sorted(
        {t for t, _ in series},
        key=lambda t: (list(OP_COLOURS).index(t) if t in OP_COLOURS else 99, t),
    )
    for (typ, q), pts in sorted(series.items()):
        xs, ys = _gapped(pts, bucket_s, x0)
        ax.plot(
            xs, ys, ls=QUANTILE_STYLE[q][0], lw=1.0 if q == "p50_ms" else 0.8,
            color=op_colour(typ, types), marker="o", markevery=_isolated(xs), ms=2.5,
            gid=f"latency-{typ}-{q}",
        )  # fmt: skip
    if series:
        ax.set_yscale("log")
        ax.set_ylabel("latency, ms (log)", fontsize=8.5)
        _legend(
            ax,
            [
                (
                    "operation type",
                    [Line2D([], [], color=op_colour(t, types), lw=2, label=t) for t in types],
                ),
                (
                    "quantile",
                    [
                        Line2D([], [], color="#444", ls=s, label=lab)
                        for s, lab in QUANTILE_STYLE.values()
                    ],
                ),
            ],
            gid="latency-legend",
        )
    else:
        _no_data(ax, "no completed operations")
    return _finish(
        fig,
        ax,
        "latency",
        "Latency quantiles by operation type",
        f"p50 (solid), p95 (dashed) and p99 (dotted) of the operations invoked in each "
        f"{bucket_s}-second bucket, from logarithmic bins (within 6%); under 1 µs (calls "
        "that never leave the client) not drawn.",
        axis,
        bands,
    )


def lso_chart(lso: dict[str, Any], axis: Axis, actions: list[FaultAction]) -> Chart:
    """High watermark minus LSO per partition (the partitions with the largest lag)."""
    fig, ax = _figure(3.0)
    bands = _bands(ax, "lso", actions, axis)
    series = lso.get("series") or {}
    handles = []
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        xs = [axis.s(x * 1e9) for x, _ in pts]
        ax.plot(
            xs, [y for _, y in pts], drawstyle="steps-post", color=colour, lw=1.0,
            marker="o", markevery=_isolated(xs), ms=2.5, gid=f"lso-{name}",
        )  # fmt: skip
        handles.append(Line2D([], [], color=colour, lw=2, label=name))
    if handles:
        ax.set_ylabel("records", fontsize=8.5)
        ax.set_ylim(bottom=0)
        _legend(ax, [("partition", handles)], gid="lso-legend")
    else:
        _no_data(ax, "no LSO samples in this run")
    return _finish(
        fig,
        ax,
        "lso",
        "LSO lag per partition",
        f"High watermark minus last stable offset ({lso.get('source') or 'no source'}): "
        "records a read_committed consumer cannot see yet; the partitions with the largest lag.",
        axis,
        bands,
    )


def open_txns_chart(rows: list[dict[str, Any]], axis: Axis, actions: list[FaultAction]) -> Chart:
    fig, ax = _figure(2.6)
    bands = _bands(ax, "open-txns", actions, axis)
    if rows:
        ax.plot(
            [axis.s(r["t_ns"]) for r in rows], [r["open"] for r in rows],
            drawstyle="steps-post", color="#1f77b4", lw=1.2, gid="open-txns-line",
        )  # fmt: skip
        ax.set_ylabel("transactions", fontsize=8.5)
        ax.set_ylim(bottom=0)
        _legend(
            ax,
            [("transactions", [Line2D([], [], color="#1f77b4", lw=2, label="open")])],
            gid="open-txns-legend",
        )
    else:
        _no_data(ax, "no transactions")
    return _finish(
        fig,
        ax,
        "open-txns",
        "Open transactions over time",
        "Transactions begun and not yet committed or aborted during each bucket (one never "
        "ended stays open to the end).",
        axis,
        bands,
    )


def anomalies_chart(
    checkers: list[str],
    per_bucket: dict[str, dict[int, int]],
    origin_ns: int,
    bucket_s: int,
    examples: list[tuple[str, str, float, str]],
    axis: Axis,
    actions: list[FaultAction],
) -> Chart:
    """One lane per checker: anomalies per bucket (grey, area ~ count, linking to the
    checker) and each example (coloured, linking to its evidence)."""
    lanes = sorted(set(checkers) | set(per_bucket) | {c for c, *_ in examples})
    lanes = [c for c in lanes if c in per_bucket or any(c == x[0] for x in examples)]
    fig, ax = _figure(0.95 + 0.32 * max(1, len(lanes)))
    bands = _bands(ax, "anomalies", actions, axis)
    top = max((n for d in per_bucket.values() for n in d.values()), default=1)
    for checker, pts in per_bucket.items():
        y = lanes.index(checker)
        for b, n in sorted(pts.items()):
            art = ax.scatter(
                [axis.s(origin_ns) + (b + 0.5) * bucket_s], [y], s=12 + 110 * math.sqrt(n / top),
                color="#999", alpha=0.55, lw=0,
            )  # fmt: skip
            art.set_gid(f"anomalies-count-{checker}-{b}")
            art.set_urls([f"#checker-{checker}"])
    for i, (checker, _kind, x, anchor) in enumerate(examples):
        y = lanes.index(checker)
        art = ax.scatter([x], [y], s=34, marker="D", lw=0.6, edgecolor="white",
                         color=SERIES_COLOURS[y % len(SERIES_COLOURS)])  # fmt: skip
        art.set_gid(f"anomalies-example-{i}")
        art.set_urls([f"#{anchor}"])
    ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
    ax.set_ylim(-0.6, max(1, len(lanes)) - 0.4)
    ax.invert_yaxis()
    ax.grid(False, axis="y")
    if not per_bucket and not examples:
        ax.text(0.5, 0.5, "no anomalies", transform=ax.transAxes, ha="center", va="center",
                color="#2a7a2a", fontsize=10)  # fmt: skip
    _legend(
        ax,
        [
            (
                "anomalies",
                [
                    Line2D([], [], ls="none", marker="o", color="#999", ms=7, label="count (area)"),
                    Line2D([], [], ls="none", marker="D", color="#d62728", ms=5, label="example"),
                ],
            )
        ],
        gid="anomalies-legend",
    )
    return _finish(
        fig,
        ax,
        "anomalies",
        "Anomaly timeline",
        f"Anomalies per checker and {bucket_s}-second bucket (grey, linked to the checker), and "
        "each example shown below (diamond, linked to its evidence).",
        axis,
        bands,
    )


def users_chart(points: list[dict[str, Any]], axis: Axis, actions: list[FaultAction]) -> Chart:
    """locust's view of the load, second by second (workload-stats.jsonl): the users running
    and the requests per second they made (failures per second beside them)."""
    fig, ax = _figure(2.8)
    bands = _bands(ax, "users", actions, axis)
    rows = [p for p in points if isinstance(p.get("time_ns"), int)]
    if rows:
        xs = [axis.s(p["time_ns"]) for p in rows]
        ax.plot(
            xs, [p.get("users", 0) for p in rows], drawstyle="steps-post", color="#1f77b4",
            lw=1.4, gid="users-line",
        )  # fmt: skip
        ax.set_ylabel("users", fontsize=8.5, color="#1f77b4")
        ax.set_ylim(bottom=0)
        rps = ax.twinx()
        rps.plot(xs, [p.get("ops_per_s", 0.0) for p in rows], color="#2ca02c", lw=1.1, gid="rps")
        rps.plot(
            xs, [p.get("failures_per_s", 0.0) for p in rows], color="#d62728", lw=1.0,
            ls="--", gid="fails-per-s",
        )  # fmt: skip
        rps.set_ylabel("requests/s", fontsize=8.5, color="#2ca02c")
        rps.set_ylim(bottom=0)
        rps.tick_params(labelsize=8)
        rps.spines["top"].set_visible(False)
    else:
        _no_data(ax, "no locust statistics recorded (workload-stats.jsonl)")
    handles = [
        Line2D([], [], color="#1f77b4", lw=2, label="users"),
        Line2D([], [], color="#2ca02c", lw=2, label="requests/s"),
        Line2D([], [], color="#d62728", lw=2, ls="--", label="failures/s"),
    ]
    _legend(ax, [("locust", handles)], gid="users-legend").set_bbox_to_anchor((1.09, 1.0))
    return _finish(
        fig,
        ax,
        "users",
        "Users and requests per second",
        "As locust counted them each second: users running (left axis), requests and failures "
        "per second (right axis; a request is one client operation).",
        axis,
        bands,
    )
