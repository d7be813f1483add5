"""One nightly run: ``txnchaos run SCENARIO --seed S --out DIR`` in its own process,
its output kept in a log file beside the run directory."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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


def execute(run: PlannedRun, out: Path, log: Path, extra: list[str]) -> RunOutcome:
    """Run it and wait. Ctrl-C is passed on to the run (which cleans up its cluster)
    and re-raised once it has exited."""
    argv = [sys.executable, "-m", "txnchaos.harness.cli", *run_command(run, out, extra)[1:]]
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        try:
            code = child.wait()
        except KeyboardInterrupt:
            # A terminal's Ctrl-C reached the child too; a signal sent to us alone did not.
            try:
                child.wait(2)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGINT)
            try:
                child.wait(120)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            raise
    return RunOutcome(code, time.monotonic() - started)
