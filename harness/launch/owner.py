"""Which harness owns a process, a container or a temp dir, and whether it still lives.

Everything a harness starts or makes for its own lifetime carries its owner: processes an
environment variable (``TXNCHAOS_HARNESS``, inherited by their children), containers and
networks labels, temp dirs a file. An owner is the harness's host, PID and the PID's start
time (clock ticks since boot, from ``/proc``), so a PID that was reused by another process
does not keep a dead run's leftovers alive. ``txnchaos cleanup`` removes what belongs to
owners that are gone (``harness/cleanup.py``).
"""

from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

OWNER_ENV = "TXNCHAOS_HARNESS"
OWNER_FILE = ".txnchaos-owner"
LABEL_HOST = "org.txnchaos.owner-host"
LABEL_PID = "org.txnchaos.owner-pid"
LABEL_START = "org.txnchaos.owner-start"
TEMP_PREFIX = "txnchaos-"


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot); None if it is gone or a
    zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    pid: int
    start: int | None  # None: unknown (a label written before start times were recorded)

    def token(self) -> str:
        return f"{self.host}:{self.pid}:{'' if self.start is None else self.start}"

    @classmethod
    def parse(cls, token: str) -> Owner | None:
        host, sep, rest = token.rpartition(":")
        host, sep2, pid = host.rpartition(":")
        if not (sep and sep2 and host and pid.isdigit() and (rest == "" or rest.isdigit())):
            return None
        return cls(host, int(pid), int(rest) if rest else None)

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> Owner | None:
        pid = labels.get(LABEL_PID, "")
        start = labels.get(LABEL_START, "")
        if not pid.isdigit():
            return None
        return cls(labels.get(LABEL_HOST, ""), int(pid), int(start) if start.isdigit() else None)

    def labels(self) -> dict[str, str]:
        out = {LABEL_HOST: self.host, LABEL_PID: str(self.pid)}
        if self.start is not None:
            out[LABEL_START] = str(self.start)
        return out

    @property
    def local(self) -> bool:
        """Whether the owner ran on this host (only then can its life be checked)."""
        return self.host in ("", this_host())

    def alive(self) -> bool:
        """Whether the owner still runs; an owner on another host counts as alive (it
        cannot be checked from here)."""
        if not self.local:
            return True
        now = start_time(self.pid)
        return now is not None and (self.start is None or now == self.start)

    def describe(self) -> str:
        return f"harness pid {self.pid} on {self.host or this_host()}"


@cache
def this_host() -> str:
    return socket.gethostname()


def this_harness() -> Owner:
    """The owner this process writes on what it starts."""
    pid = os.getpid()
    return Owner(this_host(), pid, start_time(pid))


def owned_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with this harness as the owner."""
    env = dict(os.environ if base is None else base)
    env[OWNER_ENV] = this_harness().token()
    return env


def owned_temp_dir(prefix: str) -> Path:
    """A new directory in the temp dir (``txnchaos-<prefix>...``) that names this harness
    as its owner, so ``txnchaos cleanup`` removes it if the harness dies first."""
    path = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{prefix}"))
    (path / OWNER_FILE).write_text(this_harness().token() + "\n")
    return path


def temp_dir_owner(path: Path) -> Owner | None:
    try:
        return Owner.parse((path / OWNER_FILE).read_text().strip())
    except OSError:
        return None
