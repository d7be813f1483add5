"""Starting the JVMs of a Kafka cluster so that they die with the harness.

A JVM started by the harness must not outlive it, even when the harness is killed with
SIGKILL (no cleanup runs then). Each JVM is started as the project's own nodes are, by
``launch.lifetime.spawn``: forked by the harness's one long-lived spawner thread with
``PR_SET_PDEATHSIG`` set to SIGKILL (a JVM restarted by the nemesis's thread, which ends with
the run's schedule, must not die with that thread), and with this harness named in its
environment, so that ``txnchaos cleanup`` finds what a dead run left.

``txnchaos cluster up --detach`` starts its JVMs without the tie: they are meant to
outlive the command.

The launcher only ever signals PIDs it started, and checks first that the PID still is
that node's JVM (:func:`is_our_jvm`: ``kafka.Kafka`` with that node's own
``server.properties`` on its command line; PIDs get reused).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from ..lifetime import spawn


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
            return spawn(cmd, **kwargs)
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
