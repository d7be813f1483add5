"""One nightly run: recorded as ``txnchaos run SCENARIO --seed S --out DIR`` would, in its own
process, and judged by the night's judge; its output kept in a log file beside the run
directory."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from ..run.child import run_in_child
from ..run.judge import Judge
from .plan import PlannedRun


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int  # txnchaos run's: 0 valid, 1 anomalies, 2 harness failed
    wall_s: float
    interrupted: bool = False


def run_command(run: PlannedRun, out: Path | None, extra: list[str]) -> list[str]:
    """The command that runs it (without ``out``: the one a user types to repeat it)."""
    where = ["--out", str(out)] if out is not None else []
    return ["txnchaos", "run", str(run.path), "--seed", str(run.seed), *where, *extra]


def shown(command: list[str]) -> str:
    return shlex.join(command)


def execute(run: PlannedRun, out: Path, log: Path, extra: list[str], judge: Judge) -> RunOutcome:
    """Run it, judged by ``judge``, and wait (Ctrl-C: see :func:`~..run.child.run_in_child`)."""
    code, wall = run_in_child(run.path, out, judge, ["--seed", str(run.seed), *extra], log)
    return RunOutcome(code, wall)
