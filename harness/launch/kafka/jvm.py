"""Starting the JVMs of a Kafka cluster so that they die with the harness.

A JVM started by the harness must not outlive it, even when the harness is killed with
SIGKILL (no cleanup runs then). Each JVM is started through ``setpriv --pdeathsig KILL``
(util-linux), which sets ``PR_SET_PDEATHSIG`` and execs ``java``: the PID the launcher
gets is the JVM's, and the kernel kills it when its parent goes. The parent is the
*thread* that forked, not the process; so every JVM is forked by one long-lived thread
(:class:`Spawner`): a JVM restarted by the nemesis's thread, which ends with the run's
schedule, would otherwise die with that thread.

``txnchaos cluster up --detach`` starts its JVMs without the tie: they are meant to
outlive the command.

The launcher only ever signals PIDs it started, and checks first that the PID still is
that node's JVM (:func:`is_our_jvm`: ``kafka.Kafka`` with that node's own
``server.properties`` on its command line; PIDs get reused).
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..errors import LaunchError


class Spawner:
    """Runs ``subprocess.Popen`` on one daemon thread that lives as long as the process."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[list[str], dict[str, Any], Future[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="kafka-jvm-spawner", daemon=True
                )
                self._thread.start()
        done: Future[subprocess.Popen[bytes]] = Future()
        self._queue.put((cmd, kwargs, done))
        return done.result()

    def _loop(self) -> None:
        while True:
            cmd, kwargs, done = self._queue.get()
            try:
                done.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)


SPAWNER = Spawner()


def tied_command(cmd: list[str]) -> list[str]:
    """``cmd`` run so that it is killed when the thread that forks it ends."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise LaunchError(
            "setpriv (util-linux) is needed to tie the JVMs' lives to the harness's "
            "(apt-get install util-linux)"
        )
    return [setpriv, "--pdeathsig", "KILL", *cmd]


def start_jvm(
    cmd: list[str], log: Path, *, tie_to_harness: bool, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (a ``java`` command line) with its output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        kwargs: dict[str, Any] = {
            "stdin": subprocess.DEVNULL,
            "stdout": out,
            "stderr": subprocess.STDOUT,
            "start_new_session": True,  # Ctrl-C reaches the harness, which stops the nodes
            "env": env,
        }
        if tie_to_harness:
            return SPAWNER.popen(tied_command(cmd), **kwargs)
        return subprocess.Popen(cmd, **kwargs)


def is_our_jvm(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive (not a zombie) and its command line contains ``marker``
    (a node's own properties file)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    return any(a.decode(errors="replace") == marker for a in args)
