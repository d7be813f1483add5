"""What judges a recorded run, as the harness sees it: the analysis, supplied by the layer
above both (``jobs/``), so the harness never imports it. ``txnchaos run`` hands the
orchestrator one; the commands that run many runs (nightly, repro, shrink) hand one to
:func:`~.child.run_in_child`, which records each run in a child process and judges it in
this one (one engine, one Spark session, for all of them)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TextIO


class Judge(Protocol):
    def warm(self) -> None:
        """A run is under way that this judge will judge: start what judging needs (a JVM, a
        Spark session) now, in the background, without waiting for it."""

    def judge(self, run_dir: Path, out: TextIO | None = None) -> int:
        """Judge ``run_dir``: write verdict.json and report.html into it and print a summary
        (to ``out``, default stdout). 0 valid, 1 anomalies found, 2 the run directory is
        unreadable (the message, on stderr or ``out``, says why)."""
