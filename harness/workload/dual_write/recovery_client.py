"""Runs :mod:`.recovery_process` for a crashed dual writer: to completion, or to its hold point
mid-recovery and then SIGKILLed (nothing is recorded for that kill: the writer's history shows
the recovery's INIT without a completion)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import WorkloadConfig, load_workload

MODULE = "txnchaos.harness.workload.dual_write.recovery_process"


class RecoveryError(RuntimeError):
    pass


class RecoveryClient:
    def __init__(
        self,
        config: WorkloadConfig | Mapping[str, Any],
        user: int,
        run_dir: str | os.PathLike[str],
        bootstrap: str,
        *,
        writer: str,
        txn: int | None,
        transactional_id: str,
        hold_in_recovery: bool = False,
        log_path: str | os.PathLike[str] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.config = load_workload(config)
        self.cmd = [python, "-m", MODULE, "--user", str(user), "--writer", writer]
        self.cmd += ["--transactional-id", transactional_id, "--bootstrap", bootstrap]
        self.cmd += ["--run-dir", str(run_dir)]
        if txn is not None:
            self.cmd += ["--txn", str(txn)]
        if hold_in_recovery:
            self.cmd += ["--hold", "in-recovery"]
        self.writer = writer
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def start(self, timeout_s: float) -> None:
        stderr: Any = subprocess.DEVNULL
        if self.log_path is not None:
            stderr = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(self.config.model_dump(mode="json")))
        self.proc.stdin.close()
        threading.Thread(target=self._pump, daemon=True).start()
        self.wait_line("READY", timeout_s)

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_line(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RecoveryError(f"recovery of {self.writer}: no {prefix!r} in {timeout_s}s")
            try:
                line = self._lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                code = self.proc.wait() if self.proc else None
                raise RecoveryError(
                    f"recovery of {self.writer} exited (code {code}) before printing {prefix!r}"
                )
            if line.startswith(prefix):
                return line

    def wait_hold(self, timeout_s: float) -> str:
        return self.wait_line("HOLD", timeout_s)

    def run(self, timeout_s: float) -> str:
        """Start and wait until it is done; returns what it did (nothing/committed/aborted)."""
        self.start(timeout_s)
        done = self.wait_line("DONE", timeout_s)
        assert self.proc is not None
        self.proc.wait(timeout_s)
        return done.split(" ", 1)[1]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
