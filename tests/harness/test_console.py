"""Console output that is not a terminal (CI logs, pipes, files) is never hard-wrapped: rich
would cut paths, commands and table cells at 80 columns unless COLUMNS was set."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

from txnchaos.harness.console import make_console

LONG = "/a/run/directory/" + "x" * 150 + "/report.html"


def test_a_console_that_is_not_a_terminal_does_not_wrap() -> None:
    out = io.StringIO()
    make_console(file=out).print(f"wrote {LONG}")
    assert out.getvalue() == f"wrote {LONG}\n"
    narrow = io.StringIO()
    make_console(file=narrow, width=40).print(f"wrote {LONG}")  # asked for: kept
    assert len(narrow.getvalue().splitlines()) > 1


def test_txnchaos_run_does_not_wrap_into_a_pipe(tmp_path: Path) -> None:
    """The run's first line names its directory whole (it was cut at 80 columns in CI logs)."""
    out_dir = tmp_path / ("a-run-directory-with-a-long-name-" + "x" * 80)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    cmd = [sys.executable, "-m", "txnchaos.jobs.cli", "run", "scenarios/smoke.yaml"]
    proc = subprocess.Popen(
        [*cmd, "--out", str(out_dir), "--no-analyze"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGINT)  # the run's clean stop: nothing is left behind
        proc.communicate(timeout=300)
    assert first.startswith("txnchaos run smoke seed") and first.rstrip().endswith(str(out_dir))
