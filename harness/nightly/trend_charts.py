"""trend.html's charts, one point per night, drawn with matplotlib and inlined as SVG: runs by
outcome, anomalies by checker, committed transactions per second by scenario.  A table says
what happened; these say whether it is getting better."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .pages import Night

#: outcome -> (label, colour), in stacking order
OUTCOMES = {
    "passed": ("as expected", "#2ca02c"),
    "unexpected_verdict": ("unexpected verdict", "#d62728"),
    "node_error": ("node error", "#17becf"),
    "client_crash": ("client crash", "#9467bd"),
    "client_hang": ("client hang", "#bcbd22"),
    "no_chaos": ("no chaos", "#ff7f0e"),
    "nemesis": ("nemesis errors", "#e377c2"),
    "harness": ("harness failed", "#8c564b"),
}
PALETTE = (
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
)
WIDTH, HEIGHT = 10.0, 3.0
_SVG_HEAD = re.compile(r"^.*?(<svg\b)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_STYLE: dict[Any, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "svg.fonttype": "none",
}


@dataclass
class TrendChart:
    id: str
    title: str
    svg: str


def _figure() -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, HEIGHT))
    fig.subplots_adjust(left=0.07, right=0.75, top=0.92, bottom=0.22)
    ax = fig.add_subplot()
    ax.grid(True, axis="y", color="#e4e4e4", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


def _svg(fig: Figure, chart_id: str) -> str:
    import matplotlib as mpl

    buf = io.StringIO()
    with mpl.rc_context({**_STYLE, "svg.hashsalt": f"trend-{chart_id}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = _METADATA.sub("", _SVG_HEAD.sub(r"\1", buf.getvalue(), count=1), count=1)
    return text.replace("<svg ", f'<svg class="chart-svg" aria-label="{chart_id}" ', 1)


def _x_labels(ax: Axes, nights: Sequence[Night]) -> list[int]:
    xs = list(range(len(nights)))
    ax.set_xticks(xs)
    ax.set_xticklabels([n.name for n in nights], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, max(len(nights) - 0.4, 0.6))
    return xs


def _stacked(
    ax: Axes, xs: list[int], series: list[tuple[str, str, list[float]]], unit: str
) -> None:
    bottom = [0.0] * len(xs)
    for label, colour, values in series:
        if not any(values):
            continue
        ax.bar(xs, values, bottom=bottom, color=colour, label=label, width=0.6)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel(unit)
    if any(bottom):
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        ax.text(0.5, 0.5, "none", transform=ax.transAxes, ha="center", color="#888")


def outcomes_chart(nights: Sequence[Night]) -> TrendChart:
    import matplotlib as mpl

    with mpl.rc_context(_STYLE):
        fig, ax = _figure()
        xs = _x_labels(ax, nights)
        series = [
            (label, colour, [float(n.outcomes.get(key, 0)) for n in nights])
            for key, (label, colour) in OUTCOMES.items()
        ]
        _stacked(ax, xs, series, "runs")
        return TrendChart("outcomes", "Runs by outcome", _svg(fig, "outcomes"))


def anomalies_chart(nights: Sequence[Night]) -> TrendChart:
    import matplotlib as mpl

    checkers = sorted({c for n in nights for c in n.anomalies})
    with mpl.rc_context(_STYLE):
        fig, ax = _figure()
        xs = _x_labels(ax, nights)
        series = [
            (c, PALETTE[i % len(PALETTE)], [float(n.anomalies.get(c, 0)) for n in nights])
            for i, c in enumerate(checkers)
        ]
        _stacked(ax, xs, series, "anomalies")
        return TrendChart("anomalies", "Anomalies by checker", _svg(fig, "anomalies"))


def throughput_chart(nights: Sequence[Night]) -> TrendChart:
    import matplotlib as mpl

    scenarios = sorted({s for n in nights for s in n.throughput_by_scenario})
    with mpl.rc_context(_STYLE):
        fig, ax = _figure()
        xs = _x_labels(ax, nights)
        for i, s in enumerate(scenarios):
            points = [
                (x, n.throughput_by_scenario[s])
                for x, n in zip(xs, nights, strict=True)
                if s in n.throughput_by_scenario
            ]
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                color=PALETTE[i % len(PALETTE)],
                label=s,
            )
        ax.set_ylabel("committed txn/s (median)")
        ax.set_ylim(bottom=0)
        if scenarios:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        else:
            ax.text(0.5, 0.5, "no throughput recorded", transform=ax.transAxes, ha="center")
        title = "Committed transactions per second, median per scenario"
        return TrendChart("throughput", title, _svg(fig, "throughput"))


def trend_charts(nights: Sequence[Night]) -> list[TrendChart]:
    return [outcomes_chart(nights), anomalies_chart(nights), throughput_chart(nights)]


__all__ = ["OUTCOMES", "TrendChart", "trend_charts"]
