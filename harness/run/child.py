"""A run in a process of its own, for the commands that run many runs (nightly, repro,
shrink): a run whose harness crashes or hangs cannot take them down. The child records the
run (``record``, harness/run/cli.py); this process judges it with the judge it was given, so
one engine (one Spark session) judges every run of the command."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .judge import Judge

#: the child's command: the harness's run without judging
RECORD = [sys.executable, "-m", "txnchaos.harness.run.cli", "record"]
#: the child's exit code for a run recorded in full
RECORDED = 0


def run_in_child(
    scenario_file: Path,
    run_dir: Path,
    judge: Judge,
    extra: Sequence[str] = (),
    log: Path | None = None,
) -> tuple[int, float]:
    """(exit code as ``txnchaos run``'s, wall seconds) of recording ``SCENARIO --out RUN_DIR
    [extra]`` in a child process and judging it here; the child's output and the verdict's
    summary go to ``log`` (default: this process's). Ctrl-C is passed on to the run (which
    cleans up its cluster) and re-raised once it has exited."""
    argv = [*RECORD, str(scenario_file), "--out", str(run_dir), *extra]
    started = time.monotonic()
    judge.warm()  # starts while the child runs, if it has anything to start
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
    if code == RECORDED:
        if log is None:
            code = judge.judge(run_dir)
        else:
            with log.open("a", encoding="utf-8") as out:
                code = judge.judge(run_dir, out)
    return code, time.monotonic() - started
