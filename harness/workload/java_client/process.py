"""One Java client process (a JVM running kafka-clients) and its line protocol (:mod:`.lines`).

Every call is made from the user's own thread or greenlet: :meth:`JavaProcess.request` writes
a command and reads lines until that command's answer, handing the acknowledgements and
rebalance events read meanwhile to the handlers, on the caller's side (so the history writer
is only ever used by its user). A pump reads the child's stdout into a queue: under locust,
gevent's patching makes the pump a greenlet and its pipe reads cooperative, so a user waiting
on its JVM never holds up the others; outside locust (the crashable process) it is a thread.

The JVM halts as soon as its stdin closes: when the Python side dies (a crash fault's SIGKILL)
its client dies with it, leaving an open transaction open.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ...maven import classpath
from .build import MAIN_CLASS, ensure_built
from .lines import Field, JavaError, ProtocolError, command, parse
from .versions import client_lib

#: JVM options: a small heap and the serial collector (a user's client needs little; 2 cores
#: are shared by many users), and the client's own logging at WARN.
JVM_OPTIONS = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
)

#: The JVM system property that names the user a JVM belongs to.
USER_PROPERTY = "txnchaos.user"

Handler = Callable[[dict[str, Any]], None]

#: One user of a process at a time builds the program or fetches a release: both take a file
#: lock (flock), which under gevent would block the whole process while another greenlet of
#: it holds the lock. (Under locust's patching this lock is a cooperative one.)
_PREPARING = threading.Lock()


class JavaProcessError(RuntimeError):
    """The Java process is gone, hung, or broke the protocol: its clients are unusable."""


class JavaCallError(Exception):
    """A command failed in the Java client (``error`` says how)."""

    def __init__(self, command: str, error: JavaError, answer: dict[str, Any]) -> None:
        super().__init__(f"{command}: {error.name}: {error.message}")
        self.error = error
        self.answer = answer


@dataclass
class Hello:
    """What the JVM says once it runs."""

    version: str
    two_phase: bool


class JavaProcess:
    """A JVM running the client program with kafka-clients ``version`` on its classpath."""

    def __init__(self, name: str, version: str, log_path: str | os.PathLike[str] | None) -> None:
        self.name = name
        self.version = version
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[str] | None = None
        self.hello: Hello | None = None
        self.on_ack: Handler | None = None
        self.on_event: Handler | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._seq = 0
        self._dead: str | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def command_line(self) -> list[str]:
        with _PREPARING:
            cp = f"{ensure_built()}{os.pathsep}{classpath(client_lib(self.version))}"
        # The user's name on the command line says whose JVM a process is (ps, tests).
        return ["java", *JVM_OPTIONS, f"-D{USER_PROPERTY}={self.name}", "-cp", cp, MAIN_CLASS]

    def start(self, timeout_s: float = 60.0) -> Hello:
        """Start the JVM and wait for its ``ready`` line."""
        cmd = self.command_line()
        stderr: IO[Any] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            stderr = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        finally:
            if not isinstance(stderr, int):
                stderr.close()
        threading.Thread(target=self._pump, name=f"{self.name}-stdout", daemon=True).start()
        msg = self._next(time.monotonic() + timeout_s, "its ready line")
        if not msg.get("ready"):
            raise self._broken(f"its first line is not 'ready': {msg}")
        self.hello = Hello(str(msg.get("version")), bool(msg.get("two_phase")))
        return self.hello

    def _pump(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for line in proc.stdout:
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    @property
    def alive(self) -> bool:
        return self._dead is None and self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the JVM to exit (its clients closed before by their owners); kill it if it
        does not."""
        proc = self.proc
        if proc is None:
            return
        if self.alive:
            with contextlib.suppress(JavaProcessError, JavaCallError):
                self.request("exit", timeout_s=timeout_s)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the JVM if it still runs, and reap it."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()
        if self._dead is None:
            self._dead = "stopped"

    # -- calls ----------------------------------------------------------------------------

    def _write(self, line: str) -> None:
        proc = self.proc
        if self._dead is not None or proc is None or proc.stdin is None:
            raise JavaProcessError(f"{self.name}: the Java client is not running ({self._dead})")
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except (OSError, ValueError) as e:
            raise self._broken(f"writing to it failed: {e}") from e

    def post(self, name: str, *fields: Field) -> int:
        """Send command ``name`` without waiting (``send``: answered by an ack); its seq."""
        self._seq += 1
        self._write(command(self._seq, name, *fields))
        return self._seq

    def request(self, name: str, *fields: Field, timeout_s: float = 60.0) -> dict[str, Any]:
        """Run command ``name`` and return its answer; :class:`JavaCallError` when it failed,
        :class:`JavaProcessError` when the process died or did not answer in time (it is
        then killed: whatever it was doing, its outcome is unknown)."""
        seq = self.post(name, *fields)
        deadline = time.monotonic() + timeout_s
        while True:
            msg = self._next(deadline, f"the answer to {name}")
            if msg.get("re") != seq:
                self._dispatch(msg)
                continue
            if not msg["ok"]:
                raise JavaCallError(name, msg["error"], msg)
            return msg

    def drain(self) -> None:
        """Handle the acks and events that already arrived (never waits)."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            self._dispatch(self._parsed(line))

    def _next(self, deadline: float, what: str) -> dict[str, Any]:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise self._broken(f"no {what} in time")
            try:
                line = self._lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            return self._parsed(line)

    def _parsed(self, line: str | None) -> dict[str, Any]:
        if line is None:
            code = self.proc.poll() if self.proc else None
            self._lines.put(None)  # every later read sees the end too
            raise self._broken(f"it exited (code {code}; log: {self.log_path})")
        try:
            return parse(line)
        except ProtocolError as e:
            self.kill()
            raise self._broken(str(e)) from e

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "ack" in msg:
            if self.on_ack is None:
                raise self._broken(f"an ack without a producer: {msg}")
            self.on_ack(msg)
        elif "event" in msg:
            if self.on_event is not None:
                self.on_event(msg)
        else:
            raise self._broken(f"an unexpected line: {msg}")

    def _broken(self, why: str) -> JavaProcessError:
        if self._dead is None:
            self._dead = why
        return JavaProcessError(f"{self.name}: Java client (kafka-clients {self.version}): {why}")
