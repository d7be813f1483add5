"""Re-running a candidate for real: one ``txnchaos run`` per candidate in the shrink
directory, judged like the original (the anomaly class is the set of checkers that must
flag it), within a wall-time budget."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..repro.command import outcome_of
from ..run.child import run_in_child
from ..run.judge import Judge
from .search import BudgetSpent, Scenario


@dataclass
class Attempts:
    directory: Path
    target: set[str]  # checkers that must all flag a candidate
    budget_s: float
    judge: Judge  # judges each re-run (one engine for all of them)
    log: Callable[[str], None] = print
    started: float = field(default_factory=time.monotonic)
    walls: list[float] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.walls)

    def fails(self, candidate: Scenario) -> bool:
        elapsed = time.monotonic() - self.started
        if self.walls and elapsed + max(self.walls) > self.budget_s:
            raise BudgetSpent
        n = self.count + 1
        name = f"attempt-{n:03d}"
        scenario_file = self.directory / f"{name}.yaml"
        scenario_file.write_text(yaml.safe_dump(candidate, sort_keys=False))
        run_dir = self.directory / name
        code, wall = run_in_child(
            scenario_file, run_dir, self.judge, log=self.directory / f"{name}.log"
        )
        self.walls.append(wall)
        verdict, anomalies = outcome_of(run_dir, code)
        if verdict == "harness_failed":
            self.log(f"  {name}: the harness failed (see {name}.log); counted as passing")
            return False
        found = set(anomalies)
        self.log(
            f"  {name}: {verdict}"
            + (f" ({', '.join(sorted(found))})" if found else "")
            + f" in {self.walls[-1]:.0f}s"
        )
        return self.target <= found
