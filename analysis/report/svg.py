"""Tiny dependency-free SVG charts (lines or points, shaded windows) for the report."""

from __future__ import annotations

import math
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    out = []
    v = start
    while v <= hi + 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def chart(
    series: dict[str, list[tuple[float, float]]],
    *,
    title: str,
    x_label: str = "seconds since start",
    y_label: str = "",
    shades: list[tuple[float, float, str]] | None = None,
    points: bool = False,
    width: int = 920,
    height: int = 240,
) -> str:
    """An SVG chart; ``shades`` are (x0, x1, label) windows drawn behind the data."""
    ml, mr, mt, mb = 60, 170, 28, 36
    pw, ph = width - ml - mr, height - mt - mb
    xs = [x for s in series.values() for x, _ in s]
    ys = [y for s in series.values() for _, y in s]
    for a, b, _ in shades or []:
        xs += [a, b]
    if not xs:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40">'
            f'<text x="4" y="24" font-size="13">{escape(title)}: no data</text></svg>'
        )
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    y0, y1 = 0.0, max([*ys, 1.0]) * 1.05

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return mt + ph - (y - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<text x="{ml}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for a, b, label in shades or []:
        out.append(
            f'<rect x="{sx(a):.1f}" y="{mt}" width="{max(1.0, sx(b) - sx(a)):.1f}" height="{ph}" '
            f'fill="#f4b6b6" opacity="0.45"><title>{escape(label)}</title></rect>'
        )
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    for t in _ticks(x0, x1, 8):
        out.append(
            f'<line x1="{sx(t):.1f}" y1="{mt + ph}" x2="{sx(t):.1f}" y2="{mt + ph + 4}" '
            'stroke="#888"/>'
            f'<text x="{sx(t):.1f}" y="{mt + ph + 15}" text-anchor="middle">{_fmt(t)}</text>'
        )
    for t in _ticks(y0, y1, 4):
        out.append(
            f'<line x1="{ml}" y1="{sy(t):.1f}" x2="{ml + pw}" y2="{sy(t):.1f}" stroke="#eee"/>'
            f'<text x="{ml - 5}" y="{sy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>'
        )
    out.append(
        f'<text x="{ml + pw / 2}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="12" y="{mt + ph / 2}" transform="rotate(-90 12 {mt + ph / 2})" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for i, (name, pts) in enumerate(sorted(series.items())):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(pts)
        if points:
            for x, y in pts:
                out.append(
                    f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}">'
                    f"<title>{escape(name)} t={x:g}s n={y:g}</title></circle>"
                )
        elif pts:
            d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            out.append(
                f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.4">'
                f"<title>{escape(name)}</title></polyline>"
            )
        ly = mt + 12 + i * 15
        out.append(
            f'<rect x="{ml + pw + 10}" y="{ly - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{ml + pw + 24}" y="{ly + 1}">{escape(name[:24])}</text>'
        )
    out.append("</svg>")
    return "".join(out)
