"""A workload child process that takes its workload config as JSON on stdin and reports its
progress as lines on stdout (``READY``, ``HOLD ...``, ``DONE ...``): the crashable user
(crash.py) and the dual writer's recovery (dual_write/recovery_client.py) both run one."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..launch.lifetime import spawn
from .config import WorkloadConfig


class LineChild:
    """One child process; ``error`` is the exception raised for a missing line, ``name`` how
    errors name the child."""

    def __init__(
        self,
        name: str,
        error: type[Exception],
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.error = error
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def spawn(self, cmd: list[str], config: WorkloadConfig, timeout_s: float) -> None:
        """Start ``cmd``, hand it ``config`` and wait for its READY line."""
        stderr: Any = subprocess.DEVNULL
        if self.log_path is not None:
            stderr = self.log_path.open("ab")
        # started from nemesis threads that end: the long-lived spawner keeps the child's
        # parent-death signal tied to the harness, not to that thread
        self.proc = spawn(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(config.model_dump(mode="json")))
        self.proc.stdin.close()
        threading.Thread(target=self._pump, daemon=True).start()
        self.wait_line("READY", timeout_s)

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_line(self, prefix: str, timeout_s: float) -> str:
        """The next line starting with ``prefix``; ``error`` if the child exits first or none
        comes within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.error(f"{self.name}: no {prefix!r} within {timeout_s}s")
            try:
                line = self._lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                code = self.proc.wait() if self.proc else None
                raise self.error(f"{self.name} exited (code {code}) before printing {prefix!r}")
            if line.startswith(prefix):
                return line

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> bool:
        """SIGKILL the child if it still runs and reap it; whether this killed it."""
        if self.proc is None:
            return False
        killed = self.proc.poll() is None
        if killed:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return killed
