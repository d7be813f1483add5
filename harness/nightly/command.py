"""The nightly loop: plan, run one after another, and after every run rewrite the
night's summary (so a night cut short still has one) and the trend page."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from ..console import make_console
from ..run.judge import Judge
from .junit import write_junit
from .pages import write_summary_html, write_trend
from .plan import (
    Budget,
    PlanError,
    PlannedRun,
    default_seed_base,
    load_all,
    nth_run,
    scenario_files,
)
from .results import (
    CLIENT_CRASH,
    CLIENT_HANG,
    HARNESS_FAILED,
    INVALID,
    NODE_ERROR,
    RunRow,
    fill_from_run_dir,
)
from .runner import execute, run_command, shown
from .shrinking import ShrinkPolicy, shrink_row, wanted

EXIT_PASSED = 0
EXIT_INVALID = 1
EXIT_HARNESS_FAILED = 2


@dataclass
class NightlyOptions:
    inputs: list[Path]
    out_root: Path
    runs: int | None = None
    budget_s: float | None = None
    seed_base: int | None = None
    launcher: str | None = None
    kafka_version: str | None = None
    bootstrap: str | None = None
    duration: float | None = None
    argv: list[str] = field(default_factory=list)  # how the night was started, for the record
    shrink: ShrinkPolicy = field(default_factory=ShrinkPolicy)
    #: judges every run of the night (one engine, one Spark session, for all of them);
    #: None: the night cannot run
    judge: Judge | None = None

    def run_args(self) -> list[str]:
        """Options every run gets (after SCENARIO --seed S)."""
        args: list[str] = []
        if self.launcher:
            args += ["--launcher", self.launcher]
        if self.kafka_version:
            args += ["--kafka-version", self.kafka_version]
        if self.bootstrap:
            args += ["--bootstrap", self.bootstrap]
        if self.duration is not None:
            args += ["--duration", f"{self.duration:g}"]
        return args


def night_directory(root: Path, now: datetime) -> Path:
    base = root / now.strftime("%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def exit_code(rows: list[RunRow], interrupted: bool) -> int:
    if interrupted or any(r.verdict == HARNESS_FAILED for r in rows):
        return EXIT_HARNESS_FAILED
    return EXIT_PASSED if all(r.passed for r in rows) else EXIT_INVALID


class Night:
    def __init__(self, options: NightlyOptions, console: Console) -> None:
        self.options = options
        self.console = console
        self.budget = Budget(
            runs=options.runs, seconds=options.budget_s, workload_s=options.duration
        )
        self.scenarios = load_all(scenario_files(options.inputs), options.duration)
        self.started = datetime.now(UTC)
        self.seed_base = options.seed_base if options.seed_base is not None else default_seed_base()
        self.dir = night_directory(options.out_root, self.started)
        self.rows: list[RunRow] = []
        self.walls: dict[str, list[float]] = {}
        self.clock0 = time.monotonic()
        self.stopped: str | None = None
        assert options.judge is not None, "a night's runs need a judge"
        self.judge: Judge = options.judge

    def run(self) -> int:
        first = nth_run(self.scenarios, self.seed_base, 1)
        if not self.budget.next_fits(first, 0.0, self.walls):
            raise PlanError(
                f"--budget {self.options.budget_s:g}s is shorter than one run of "
                f"{first.scenario.name} (about {self.budget.estimate(first, self.walls):.0f}s)"
            )
        self.dir.mkdir(parents=True)
        planned = self.budget.runs
        self.console.print(
            f"nightly: {len(self.scenarios)} scenario(s), "
            f"{f'{planned} runs' if planned else f'a budget of {self.budget.seconds:g}s'}, "
            f"seeds from {self.seed_base}; output in {self.dir}"
        )
        interrupted = False
        index = 1
        try:
            while True:
                run = nth_run(self.scenarios, self.seed_base, index)
                elapsed = time.monotonic() - self.clock0
                if not self.budget.next_fits(run, elapsed, self.walls):
                    if self.budget.seconds is not None:
                        self.stopped = (
                            f"budget: {elapsed:.0f}s spent, the next run needs about "
                            f"{self.budget.estimate(run, self.walls):.0f}s"
                        )
                    break
                self.one(run, planned)
                index += 1
        except KeyboardInterrupt:
            interrupted = True
            self.stopped = "interrupted (Ctrl-C)"
            self.console.print("[yellow]interrupted: the summary holds the runs finished[/]")
        self.write()
        code = exit_code(self.rows, interrupted)
        passed = sum(1 for r in self.rows if r.passed)
        self.console.print(
            f"nightly: {passed}/{len(self.rows)} runs as expected; summary "
            f"{self.dir / 'summary.html'}, junit {self.dir / 'junit.xml'}, trend "
            f"{self.options.out_root / 'trend.html'}"
        )
        return code

    def one(self, run: PlannedRun, planned: int | None) -> None:
        of = f"/{planned}" if planned else ""
        self.console.print(
            f"[{run.index}{of}] {run.scenario.name} seed {run.seed} "
            f"({self.options.duration or run.scenario.duration:g}s of workload) ..."
        )
        out = self.dir / "runs" / run.label
        log = self.dir / "logs" / f"{run.label}.log"
        started = datetime.now(UTC).isoformat(timespec="seconds")
        row = RunRow(
            index=run.index,
            scenario=run.scenario.name,
            scenario_file=str(run.path),
            seed=run.seed,
            verdict=HARNESS_FAILED,
            expected=run.scenario.expect.verdict,
            exit_code=-1,
            wall_s=0.0,
            started=started,
            run_dir=out.relative_to(self.dir).as_posix(),
            log=log.relative_to(self.dir).as_posix(),
            command=shown(run_command(run, None, self.options.run_args())),
        )
        try:
            outcome = execute(run, out, log, self.options.run_args(), self.judge)
        except KeyboardInterrupt:
            row.failure = "interrupted"
            self.rows.append(row)
            raise
        row.exit_code, row.wall_s = outcome.exit_code, round(outcome.wall_s, 1)
        fill_from_run_dir(row, self.dir)
        self.rows.append(row)
        self.walls.setdefault(run.scenario.name, []).append(outcome.wall_s)
        self.console.print(f"    {self.describe(row)}")
        self.write()
        if self.options.shrink.enabled and wanted(row):
            self.shrink(row, outcome.wall_s)

    def shrink(self, row: RunRow, run_wall_s: float) -> None:
        """Shrink an unexpectedly invalid run within the shrink budget, and within what is
        left of a night's --budget (no room for one re-run: not shrunk, and the row says so)."""
        budget = self.options.shrink.budget_s
        if self.budget.seconds is not None:
            left = self.budget.seconds - (time.monotonic() - self.clock0)
            if left < run_wall_s:
                row.shrink_note = "not shrunk: the night's --budget has no room for a re-run"
                self.console.print(f"    {row.shrink_note}")
                self.write()
                return
            budget = min(budget, left)
        self.console.print(f"    shrinking it (budget {budget:.0f}s) ...")
        shrink_row(row, self.dir, budget, self.judge)
        where = f" ({row.shrunk})" if row.shrunk else ""
        self.console.print(f"    {row.shrink_note}{where}")
        self.write()

    @staticmethod
    def describe(row: RunRow) -> str:
        style = "green" if row.passed else "yellow" if row.verdict == HARNESS_FAILED else "red"
        detail = ", ".join(f"{k} {v}" for k, v in sorted(row.anomalies.items()))
        if row.nemesis_errors:
            detail = ", ".join(filter(None, (detail, row.nemesis)))
        if row.no_chaos:
            detail = ", ".join(filter(None, (detail, row.no_chaos)))
        if row.findings:
            detail = "; ".join(filter(None, (detail, *row.findings)))
        if row.verdict == HARNESS_FAILED:
            last = (row.failure or "").strip().splitlines()
            detail = last[-1] if last else f"exit code {row.exit_code}"
        rate = f", {row.throughput:g} txn/s" if row.throughput is not None else ""
        expect = "" if row.verdict == row.expected else f" (expected {row.expected})"
        judged = f", judged by {row.engine}" if row.engine else ""
        return (
            f"[{style}]{row.outcome}[/]{expect}{': ' + detail if detail else ''}"
            f"{rate}{judged}, {row.wall_s:.0f}s"
        )

    def summary(self) -> dict[str, Any]:
        rows = self.rows
        repeat = ["txnchaos", "nightly", *self.options.argv, "--seed-base", str(self.seed_base)]
        return {
            "schema_version": 1,
            "night": self.dir.name,
            "started": self.started.isoformat(timespec="seconds"),
            "wall_s": round(time.monotonic() - self.clock0, 1),
            "seed_base": self.seed_base,
            "repeat": shown(repeat),
            "scenarios": [str(s.path) for s in self.scenarios],
            "stopped": self.stopped,
            "totals": {
                "runs": len(rows),
                "passed": sum(1 for r in rows if r.passed),
                "invalid": sum(1 for r in rows if r.verdict == INVALID),
                "harness_failed": sum(1 for r in rows if r.verdict == HARNESS_FAILED),
                "nemesis_failed": sum(1 for r in rows if r.nemesis_errors),
                "node_error": sum(1 for r in rows if r.findings_of(NODE_ERROR)),
                "client_crash": sum(1 for r in rows if r.findings_of(CLIENT_CRASH)),
                "client_hang": sum(1 for r in rows if r.findings_of(CLIENT_HANG)),
                "no_chaos": sum(1 for r in rows if r.no_chaos),
            },
            "runs": [r.to_json() for r in rows],
        }

    def write(self) -> None:
        summary = self.summary()
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        write_summary_html(summary, self.rows, self.dir / "summary.html")
        write_junit(self.rows, self.dir / "junit.xml", summary["wall_s"], summary)
        write_trend(self.options.out_root)


def main_nightly(options: NightlyOptions, console: Console | None = None) -> int:
    return Night(options, console or make_console()).run()
