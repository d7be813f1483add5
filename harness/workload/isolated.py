"""A workload user whose clients run in a process of its own (``workload.isolation: process``),
so that a client library aborting its process — librdkafka's ``rd_assert`` under a lost
response, a segfault — is a finding, not the end of the run.

locust runs every user in the one workload process; a native abort there ends them all, and
before this the run with them ("the harness failed ... exited with code -6").  Here the locust
user keeps only the bookkeeping: :class:`IsolatedWorker` has a worker's interface (``start``,
``step``, ``stop``, ``process``) and drives the real worker in a child
(:mod:`.isolated_child`) one step at a time, firing the child's locust events from the user's
greenlet.  When the child dies from a signal, the worker writes the crash record
(:func:`~.crash_report.record_client_crash`: library and version, the assertion, the ops in
flight), closes the child's history with a STOP op, reports a ``client crash`` failure to
locust, and starts a successor: the same spec and user index (so the same transactional.id for
``{index}`` templates, which fences the crashed one), under a new process name — what a crashed
client's restart does.  The other users never notice.

Imported in the workload process only (gevent-patched: the pipes and waits below yield).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...rundir.run_dir import HISTORY_DIR
from .crash_report import record_client_crash
from .kinds.registry import user_kind
from .recording import OperationFailed
from .workers import NameAllocator, WorkerContext

log = logging.getLogger(__name__)

MODULE = "txnchaos.harness.workload.isolated_child"
CLIENT_LOG_DIR = Path("logs") / "clients"
#: how long a child may take to start its worker (clients created, START recorded)
START_TIMEOUT_S = 120.0
#: how long a child may take to stop its worker (clients closed) before it is killed
STOP_TIMEOUT_S = 60.0
#: pause before a crashed user's successor starts (a client that crashes at once must not spin)
RESTART_BACKOFF_S = 1.0


class UserProcessFailed(RuntimeError):
    """The user's process failed without a signal (a Python error: its log says which)."""


class ChildDied(Exception):
    """The child's stdout ended before the line the parent waited for."""


class IsolatedWorker:
    """A worker's interface over one user's process (see the module docstring)."""

    def __init__(
        self,
        spec: Any,
        ctx: WorkerContext,
        names: NameAllocator,
        *,
        children: set[IsolatedWorker] | None = None,
    ) -> None:
        self.spec = spec
        self.ctx = ctx
        self.names = names
        self.kind = user_kind(spec.kind)
        self.request_type = self.kind.worker.request_type
        self.user = next(i for i, u in enumerate(ctx.config.users) if u is spec)
        self.process, self.index = names.allocate(ctx.config.process_prefix(spec))
        self.proc: subprocess.Popen[str] | None = None
        self.children = children if children is not None else set()
        self.crashes: list[dict[str, Any]] = []
        self.stopped = False

    # -- the child ----------------------------------------------------------------------------

    def log_path(self) -> Path:
        return self.ctx.run_dir / CLIENT_LOG_DIR / f"{self.process}.log"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", MODULE, "--user", str(self.user), "--process", self.process]
        cmd += ["--index", str(self.index), "--bootstrap", self.ctx.bootstrap]
        cmd += ["--run-dir", str(self.ctx.run_dir), "--flush-every", str(self.ctx.flush_every)]
        if self.ctx.seed is not None:
            cmd += ["--seed", str(self.ctx.seed)]
        if self.ctx.fsync:
            cmd.append("--fsync")
        return cmd

    def _spawn(self) -> None:
        history = self.ctx.run_dir / HISTORY_DIR / f"{self.process}.jsonl"
        history.parent.mkdir(parents=True, exist_ok=True)
        history.touch()  # claim the name now (NameAllocator skips existing files)
        log_path = self.log_path()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as err:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                bufsize=1,
            )
        assert self.proc.stdin is not None
        self._send(json.dumps(self.ctx.config.model_dump(mode="json")))
        self.children.add(self)

    def _send(self, line: str) -> bool:
        """Write a command; False when the child is gone (its pipe closed)."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def _read_until(self, wanted: str) -> None:
        """Relay the child's events until the line ``wanted``; ChildDied at EOF."""
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            raw = self.proc.stdout.readline()
            if not raw:
                raise ChildDied(wanted)
            line = raw.rstrip("\n")
            if line == wanted:
                return
            if line.startswith("EV "):
                self._relay(json.loads(line[3:]))
            elif line.startswith("ERR "):
                raise RuntimeError(f"{self.process}: {line[4:]} (see {self.log_path()})")

    def _relay(self, ev: dict[str, Any]) -> None:
        exc = OperationFailed(ev["e"]) if ev.get("e") is not None else None
        self.ctx.reporter(str(ev["t"]), str(ev["n"]), float(ev["ms"]), exc)

    def _wait_exit(self, timeout_s: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    # -- a worker's interface ----------------------------------------------------------------

    def start(self) -> None:
        """Start the user's process and wait until its worker started (a crash meanwhile:
        recorded, and a successor started)."""
        while True:
            self._spawn()
            try:
                self._read_until("READY")
                return
            except ChildDied:
                if not self._died("start"):
                    return

    def step(self) -> None:
        """One worker step in the child; a crash is recorded and the user restarted."""
        if self.proc is None or self.stopped:
            return
        try:
            if not self._send("STEP"):
                raise ChildDied("DONE")
            self._read_until("DONE")
        except ChildDied:
            if self._died("step"):
                self.start()

    def stop(self, *, abort_open: bool = False) -> None:
        """Clean stop: the child finishes its step, stops its worker and exits."""
        if self.stopped:
            return
        self.stopped = True
        if self.proc is None:
            return
        try:
            if self._send(f"STOP {int(abort_open)}"):
                self._read_until("STOPPED")
            else:
                raise ChildDied("STOPPED")
        except ChildDied:
            self._died("stop")
        finally:
            if self.proc is not None:
                self._wait_exit(STOP_TIMEOUT_S)
            self.children.discard(self)

    def stopping(self) -> None:
        """The run is stopping its users: the child stops retrying commits and aborts."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGUSR1)

    def terminate(self) -> None:
        """The last resort of a runner that stops: SIGTERM (a clean stop), then SIGKILL."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self._wait_exit(STOP_TIMEOUT_S)
        self.children.discard(self)

    # -- crashes -----------------------------------------------------------------------------

    def _died(self, during: str) -> bool:
        """The child's output ended: record a crash (a signal) and say whether a successor
        is to start (``self.process`` is then its name); an exit without a signal is a
        Python error in the user, raised as :class:`UserProcessFailed`."""
        code = self._wait_exit(STOP_TIMEOUT_S)
        self.children.discard(self)
        if code >= 0:
            if during == "stop" and code == 0:
                return False
            raise UserProcessFailed(
                f"{self.process}: its process exited with code {code} during {during} "
                f"(see {self.log_path()})"
            )
        crashed = self.process
        successor = None
        if during != "stop" and not self.ctx.stopping():
            successor, _ = self.names.allocate(self.ctx.config.process_prefix(self.spec))
        record = record_client_crash(
            self.ctx.run_dir,
            crashed,
            kind=self.spec.kind,
            returncode=code,
            log=self.log_path(),
            native_client=self.kind.native_client,
            user_index=self.index,
            restarted_as=successor,
        )
        self.crashes.append(record)
        log.error("client crash: %s %s: %s", crashed, record["signal"], record["message"])
        self.ctx.reporter(
            self.request_type, "client crash", 0.0, OperationFailed(record["message"])
        )
        self.proc = None
        if successor is None:
            return False
        time.sleep(RESTART_BACKOFF_S)
        self.process = successor
        return True


def isolated(spec: Any, config: Any) -> bool:
    """Whether ``spec``'s users run in processes of their own under ``config``."""
    return bool(config.isolation == "process" and user_kind(spec.kind).native_client)


__all__ = ["IsolatedWorker", "UserProcessFailed", "isolated"]
