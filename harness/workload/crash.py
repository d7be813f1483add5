"""Client crash faults: run a workload user in its own OS process and SIGKILL it.

::

    c = CrashableClient(config, user=0, run_dir=R, bootstrap=B, hold="before-commit")
    c.start()                   # spawns the process, waits for READY
    c.wait_hold()               # the user is in the middle of a transaction (see crashable.py)
    c.kill()                    # SIGKILL; appends a STOP op with outcome info to its history
    c2 = c.successor()          # same user index (same transactional.id for "{index}"),
    c2.start()                  # new process name: a restarted writer never reuses its name

The killed process's history keeps every line it flushed (the writer flushes every line by
default), so its last operations appear as invocations without completion, which compaction
turns into ``info`` ops.  Nothing aborts its open transaction: the coordinator must, after
transaction.timeout.ms (or a successor with the same transactional.id fences it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...rundir.run_dir import HISTORY_DIR
from ...rundir.schema import EventType, Outcome
from ...rundir.writer import HistoryWriter
from .config import WorkloadConfig, load_workload
from .line_child import LineChild
from .workers import NameAllocator

MODULE = "txnchaos.harness.workload.crashable"


class CrashableError(RuntimeError):
    pass


class CrashableClient:
    """One user of the workload config in a child process that can be killed."""

    def __init__(
        self,
        config: WorkloadConfig | Mapping[str, Any],
        user: int,
        run_dir: str | os.PathLike[str],
        bootstrap: str,
        *,
        hold: str = "none",
        hold_after: int = 0,
        seed: int | None = None,
        names: NameAllocator | None = None,
        index: int | None = None,
        process: str | None = None,
        python: str = sys.executable,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = load_workload(config)
        if not 0 <= user < len(self.config.users):
            raise ValueError(f"user {user} is not in the config's users")
        self.user = user
        self.spec = self.config.users[user]
        self.run_dir = Path(run_dir)
        self.bootstrap = bootstrap
        self.hold = hold
        self.hold_after = hold_after
        self.seed = seed
        self.names = names or NameAllocator(self.run_dir)
        if process is None:
            process, n = self.names.allocate(self.config.process_prefix(self.spec))
            index = n if index is None else index
        self.process = process
        self.index = index or 0
        self.python = python
        self.log_path = Path(log_path) if log_path else None
        # Claim the name on disk now: the child creates its history file only once it has
        # started (seconds on a loaded machine), and a workload process allocating names
        # meanwhile (NameAllocator skips existing files) would otherwise take the same one.
        claimed = self.run_dir / HISTORY_DIR / f"{self.process}.jsonl"
        claimed.parent.mkdir(parents=True, exist_ok=True)
        claimed.touch()
        self.child = LineChild(self.process, CrashableError, log_path)
        self.killed_ns: int | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def command(self) -> list[str]:
        cmd = [
            self.python,
            "-m",
            MODULE,
            "--user",
            str(self.user),
            "--process",
            self.process,
            "--index",
            str(self.index),
            "--bootstrap",
            self.bootstrap,
            "--run-dir",
            str(self.run_dir),
            "--hold",
            self.hold,
            "--hold-after",
            str(self.hold_after),
        ]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        return cmd

    def start(self, timeout_s: float = 60.0) -> None:
        self.child.spawn(self.command(), self.config, timeout_s)

    def wait_line(self, prefix: str, timeout_s: float) -> str:
        return self.child.wait_line(prefix, timeout_s)

    def wait_hold(self, timeout_s: float = 120.0) -> str:
        """Wait until the child reached its hold point; returns the HOLD line."""
        return self.wait_line("HOLD", timeout_s)

    @property
    def alive(self) -> bool:
        return self.child.alive

    def kill(self) -> None:
        """SIGKILL the child, then record its crash (STOP, outcome info) in its history."""
        if self.child.proc is None:
            return
        now = time.time_ns()
        if self.child.kill():
            self.killed_ns = now
        if self.killed_ns is not None:
            record_crash(self.run_dir, self.process, self.killed_ns)

    def stop(self, timeout_s: float = 60.0) -> int:
        """Clean stop (SIGTERM); SIGKILL if it does not exit in time.  Returns the exit code."""
        proc = self.child.proc
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(proc.returncode or 0)

    def successor(self, **overrides: Any) -> CrashableClient:
        """A restart: same user and index (so the same transactional.id for ``{index}``
        templates, which fences this one), a new process name."""
        kw: dict[str, Any] = {
            "hold": "none",
            "hold_after": 0,
            "seed": self.seed,
            "names": self.names,
            "python": self.python,
            "log_path": self.log_path,
        }
        kw.update(overrides)
        process, _ = self.names.allocate(self.config.process_prefix(self.spec))
        return CrashableClient(
            self.config,
            self.user,
            self.run_dir,
            self.bootstrap,
            index=self.index,
            process=process,
            **kw,
        )


def record_crash(run_dir: str | os.PathLike[str], process: str, killed_ns: int) -> None:
    """Append a STOP op with outcome info (the process crashed) to ``process``'s history."""
    with HistoryWriter.resume(run_dir, process) as w:
        w.record(
            EventType.STOP,
            Outcome.INFO,
            invoke_ns=killed_ns,
            complete_ns=killed_ns,
            error="killed (SIGKILL)",
        )
