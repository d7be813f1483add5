"""``txnchaos run`` in a process of its own, for the commands that run many runs
(nightly, repro, shrink): a run whose harness crashes or hangs cannot take them down."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def run_in_child(
    scenario_file: Path, run_dir: Path, extra: Sequence[str] = (), log: Path | None = None
) -> tuple[int, float]:
    """(exit code, wall seconds) of ``txnchaos run SCENARIO --out RUN_DIR [extra]``; its
    output goes to ``log`` (default: this process's). Ctrl-C is passed on to the run
    (which cleans up its cluster) and re-raised once it has exited."""
    argv = [sys.executable, "-m", "txnchaos.harness.cli", "run", str(scenario_file)]
    argv += ["--out", str(run_dir), *extra]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        sink = None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            sink = stack.enter_context(log.open("wb"))
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT if sink else None)
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
    return code, time.monotonic() - started
