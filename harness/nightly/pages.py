"""summary.html (one row per run, links to each report) and trend.html (charts of the
nights: runs by outcome, anomalies by checker, throughput; then one row per night, from every
summary.json under the output root)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from .results import HARNESS_FAILED, INVALID, RunRow
from .trend_charts import trend_charts


def _env() -> Environment:
    return Environment(
        loader=PackageLoader("txnchaos.harness.nightly", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def write_summary_html(summary: dict[str, Any], rows: list[RunRow], path: Path) -> None:
    page = _env().get_template("summary.html.j2").render(s=summary, rows=rows)
    path.write_text(page)


@dataclass
class Night:
    name: str  # the night's directory, relative to the root
    started: str
    runs: int
    passed: int
    invalid: int
    harness_failed: int
    anomalies: dict[str, int]
    median_throughput: float | None
    #: runs by their row's class (``passed`` or its most serious problem, results.PROBLEMS)
    outcomes: dict[str, int] = field(default_factory=dict)
    #: median committed transactions per second of each scenario's runs
    throughput_by_scenario: dict[str, float] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.harness_failed:
            return "harness failed"
        return "passed" if self.passed == self.runs else "failed"

    @property
    def node_error(self) -> int:
        return self.outcomes.get("node_error", 0)

    @property
    def client_crash(self) -> int:
        return self.outcomes.get("client_crash", 0)

    @property
    def no_chaos(self) -> int:
        return self.outcomes.get("no_chaos", 0)

    @property
    def nemesis_failed(self) -> int:
        return self.outcomes.get("nemesis", 0)


def night_of(summary_file: Path, root: Path) -> Night | None:
    """One night from its summary.json (None if unreadable: a broken or partial night
    is left out of the trend, never a reason for it to fail)."""
    try:
        data = json.loads(summary_file.read_text())
        rows = [RunRow.from_json(r) for r in data["runs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    anomalies: dict[str, int] = {}
    for r in rows:
        for checker, n in r.anomalies.items():
            anomalies[checker] = anomalies.get(checker, 0) + n
    rates = [r.throughput for r in rows if r.throughput is not None]
    by_scenario: dict[str, list[float]] = {}
    for r in rows:
        if r.throughput is not None:
            by_scenario.setdefault(r.scenario, []).append(r.throughput)
    return Night(
        name=summary_file.parent.relative_to(root).as_posix(),
        started=str(data.get("started", "")),
        runs=len(rows),
        passed=sum(1 for r in rows if r.passed),
        invalid=sum(1 for r in rows if r.verdict == INVALID),
        harness_failed=sum(1 for r in rows if r.verdict == HARNESS_FAILED),
        anomalies=dict(sorted(anomalies.items())),
        median_throughput=round(median(rates), 1) if rates else None,
        outcomes=dict(Counter(r.status_class for r in rows)),
        throughput_by_scenario={s: round(median(v), 1) for s, v in sorted(by_scenario.items())},
    )


def write_trend(root: Path) -> Path:
    """trend.html in ``root`` from every ``*/summary.json`` below it, oldest first."""
    nights = [n for f in root.glob("*/summary.json") if (n := night_of(f, root)) is not None]
    nights.sort(key=lambda n: (n.started, n.name))
    path = root / "trend.html"
    charts = trend_charts(nights) if nights else []
    page = _env().get_template("trend.html.j2").render(nights=nights, root=root, charts=charts)
    path.write_text(page)
    return path
