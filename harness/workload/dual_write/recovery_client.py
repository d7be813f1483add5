"""Runs :mod:`.recovery_process` for a crashed dual writer: to completion, or to its hold point
mid-recovery and then SIGKILLed (nothing is recorded for that kill: the writer's history shows
the recovery's INIT without a completion)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from ..config import WorkloadConfig, load_workload
from ..line_child import LineChild

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
        self.child = LineChild(f"recovery of {writer}", RecoveryError, log_path)

    def start(self, timeout_s: float) -> None:
        self.child.spawn(self.cmd, self.config, timeout_s)

    def wait_line(self, prefix: str, timeout_s: float) -> str:
        try:
            return self.child.wait_line(prefix, timeout_s)
        except RecoveryError:
            self.kill()  # a recovery that stops answering is not left running
            raise

    def wait_hold(self, timeout_s: float) -> str:
        return self.wait_line("HOLD", timeout_s)

    def run(self, timeout_s: float) -> str:
        """Start and wait until it is done; returns what it did (nothing/committed/aborted)."""
        self.start(timeout_s)
        done = self.wait_line("DONE", timeout_s)
        assert self.child.proc is not None
        self.child.proc.wait(timeout_s)
        return done.split(" ", 1)[1]

    def kill(self) -> None:
        self.child.kill()
