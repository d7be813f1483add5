"""Which scenario runs with which seed: scenarios in rotation, seeds counted up from a
base that is recorded, so any run (or the whole night) can be repeated exactly."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the scenario model pulls in the workload; the CLI imports this module
    from ..run.scenario import Scenario

SUFFIXES = (".yaml", ".yml")


class PlanError(ValueError):
    """Bad nightly input (no scenarios, an invalid scenario file): exit code 2."""


@dataclass(frozen=True)
class PlannedScenario:
    path: Path
    scenario: Scenario


@dataclass(frozen=True)
class PlannedRun:
    index: int  # 1-based, in start order
    path: Path
    scenario: Scenario
    seed: int

    @property
    def label(self) -> str:
        return f"{self.index:03d}-{self.scenario.name}-seed{self.seed}"


def scenario_files(inputs: list[Path]) -> list[Path]:
    """Scenario files named directly, and every *.yaml/*.yml directly in a directory
    (sorted), in the order given; a path given twice runs twice as often."""
    files: list[Path] = []
    for item in inputs:
        if item.is_dir():
            found = sorted(p for p in item.iterdir() if p.suffix in SUFFIXES and p.is_file())
            if not found:
                raise PlanError(f"{item}: no scenario files (*.yaml) in this directory")
            files += found
        elif item.is_file():
            files.append(item)
        else:
            raise PlanError(f"{item}: no such scenario file or directory")
    if not files:
        raise PlanError("no scenarios given")
    return files


def load_all(files: list[Path], duration: float | None = None) -> list[PlannedScenario]:
    """Every scenario parsed and checked up front (``duration`` overriding each one's):
    a bad file is reported before any run starts."""
    from ..run.scenario import ScenarioError, fault_outlasting_workload, load_scenario

    planned = []
    for path in files:
        try:
            scenario = load_scenario(path)
        except ScenarioError as exc:
            raise PlanError(str(exc)) from exc
        problem = fault_outlasting_workload(scenario, path, duration)
        if problem:
            raise PlanError(problem)
        planned.append(PlannedScenario(path, scenario))
    return planned


def default_seed_base(now: float | None = None) -> int:
    """A new base every night (seconds since the epoch, modulo 10^9): seeds rotate
    without the user choosing them, and the summary records them."""
    return int(now if now is not None else time.time()) % 1_000_000_000


def nth_run(scenarios: list[PlannedScenario], seed_base: int, index: int) -> PlannedRun:
    """Run ``index`` (1-based): scenarios in rotation, seed ``seed_base + index - 1``."""
    chosen = scenarios[(index - 1) % len(scenarios)]
    return PlannedRun(index, chosen.path, chosen.scenario, seed_base + index - 1)


@dataclass
class Budget:
    """When to stop starting runs: after ``runs`` runs, or when the next run would not
    finish within ``seconds`` (estimated from the runs so far, else from the
    scenario's workload duration plus a fixed allowance for start-up and analysis)."""

    runs: int | None = None
    seconds: float | None = None
    first_run_allowance_s: float = 120.0
    workload_s: float | None = None  # --duration, overriding each scenario's

    def __post_init__(self) -> None:
        if (self.runs is None) == (self.seconds is None):
            raise PlanError("give exactly one of --runs and --budget")
        if self.runs is not None and self.runs < 1:
            raise PlanError(f"--runs must be at least 1, got {self.runs}")
        if self.seconds is not None and self.seconds <= 0:
            raise PlanError("--budget must be positive")

    def estimate(self, run: PlannedRun, walls: dict[str, list[float]]) -> float:
        done = walls.get(run.scenario.name)
        if done:
            return max(done)
        return (self.workload_s or run.scenario.duration) + self.first_run_allowance_s

    def next_fits(self, run: PlannedRun, elapsed_s: float, walls: dict[str, list[float]]) -> bool:
        if self.runs is not None:
            return run.index <= self.runs
        assert self.seconds is not None
        return elapsed_s + self.estimate(run, walls) <= self.seconds


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``8h``, ``1h30m`` -> seconds (the command line's one duration
    syntax, :func:`~..cli_input.parse_duration`); PlanError names --budget."""
    from ..cli_input import parse_duration as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise PlanError(f"--budget: {exc}") from None
