"""``txnchaos cleanup``: remove what dead harnesses left behind.

A harness killed with ``kill -9`` runs no cleanup. Its local nodes and workload processes
die with it (``launch/lifetime.py``) and the docker launcher's watchdog removes its
containers (``launch/docker_watchdog.py``), but a watchdog can be killed too, a harness
can die before either is in place, and temp dirs stay. This command finds the leftovers
by their owner (``launch/owner.py``: processes by their ``TXNCHAOS_HARNESS`` environment,
containers and networks by their ``org.txnchaos.*`` labels, temp dirs by their owner
file), keeps everything whose harness still runs (or ran on another host, where its life
cannot be checked), and removes the rest, printing each thing it removed. Nodes of
``txnchaos cluster up`` have no owner on purpose and are never touched (``cluster down``
stops them).

Exit codes: 0 everything found was removed (or nothing was found), 2 something could not
be removed or the Docker engine could not be asked (one line each says what).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .launch.owner import (
    OWNER_ENV,
    TEMP_PREFIX,
    Owner,
    start_time,
    temp_dir_owner,
)

EXIT_CLEAN, EXIT_FAILED = 0, 2
LABEL_RUN = "org.txnchaos.run"  # the docker launcher's run label (launch/docker.py)
KILL_WAIT_S = 5.0


@dataclass(slots=True)
class Leftover:
    kind: str  # "process", "container", "network", "temp dir"
    name: str
    owner: Owner
    remove: Callable[[], None]

    def describe(self) -> str:
        return f"{self.kind} {self.name} ({self.owner.describe()}, gone)"


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _cmdline(pid: int) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(a.decode(errors="replace") for a in args if a)
    return text if len(text) <= 120 else text[:117] + "..."


def _kill(pid: int, started: int) -> None:
    """SIGKILL ``pid`` if it is still the process that was found (PIDs get reused)."""
    if start_time(pid) != started:
        return
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while start_time(pid) == started and time.monotonic() < deadline:
        time.sleep(0.02)
    if start_time(pid) == started:
        raise OSError(f"process {pid} is still there after SIGKILL")


def process_leftovers(harness_pid: int | None = None) -> Iterator[Leftover]:
    """Processes started by a harness (its environment names it) that is gone."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        token = _environ(pid).get(OWNER_ENV)
        owner = Owner.parse(token) if token else None
        if owner is None or owner.pid == me:
            continue
        if harness_pid is not None and owner.pid != harness_pid:
            continue
        started = start_time(pid)
        if started is None or owner.alive():
            continue
        yield Leftover(
            "process",
            f"{pid} ({_cmdline(pid)})",
            owner,
            lambda pid=pid, started=started: _kill(pid, started),  # type: ignore[misc]
        )


def temp_dir_leftovers(
    root: Path | None = None, harness_pid: int | None = None
) -> Iterator[Leftover]:
    """Temp dirs (``txnchaos-*`` with an owner file) whose harness is gone."""
    root = Path(tempfile.gettempdir()) if root is None else root
    for path in sorted(root.glob(f"{TEMP_PREFIX}*")):
        if not path.is_dir() or path.is_symlink():
            continue
        owner = temp_dir_owner(path)
        if owner is None or owner.alive():
            continue
        if harness_pid is not None and owner.pid != harness_pid:
            continue
        yield Leftover("temp dir", str(path), owner, lambda path=path: shutil.rmtree(path))  # type: ignore[misc]


def docker_leftovers(client: Any, harness_pid: int | None = None) -> Iterator[Leftover]:
    """Containers, then networks, labelled by a docker run whose harness is gone."""
    for container in client.containers.list(all=True, filters={"label": LABEL_RUN}):
        owner = Owner.from_labels(container.labels or {})
        if owner is None or owner.alive():
            continue
        if harness_pid is not None and owner.pid != harness_pid:
            continue
        run = (container.labels or {}).get(LABEL_RUN, "?")
        yield Leftover(
            "container",
            f"{container.name} (run {run})",
            owner,
            lambda c=container: c.remove(force=True, v=True),  # type: ignore[misc]
        )
    for network in client.networks.list(filters={"label": LABEL_RUN}):
        labels = network.attrs.get("Labels") or {}
        owner = Owner.from_labels(labels)
        if owner is None or owner.alive():
            continue
        if harness_pid is not None and owner.pid != harness_pid:
            continue
        yield Leftover(
            "network",
            f"{network.name} (run {labels.get(LABEL_RUN, '?')})",
            owner,
            lambda n=network: n.remove(),  # type: ignore[misc]
        )


def _docker_client(explicit_host: str | None) -> tuple[Any, str] | None:
    """(client, where) of the engine to check, or None when none is configured here."""
    from .launch.docker import _client, configure_testcontainers, docker_host

    host = docker_host(explicit_host)
    if host is None:
        if not Path("/var/run/docker.sock").exists():
            return None
        host = "unix:///var/run/docker.sock"
    configure_testcontainers(host)
    return _client(), host


def run_cleanup(
    *,
    dry_run: bool,
    harness_pid: int | None,
    use_docker: bool,
    docker_host: str | None,
    echo: Callable[[str], None],
) -> int:
    failed = 0
    removed = 0
    found: list[Leftover] = []
    found += process_leftovers(harness_pid)
    engine = None
    if use_docker:
        try:
            engine = _docker_client(docker_host)
            if engine is not None:
                found += docker_leftovers(engine[0], harness_pid)
        except Exception as exc:
            where = engine[1] if engine is not None else (docker_host or "DOCKER_HOST")
            echo(f"error: cannot list containers of the Docker engine at {where}: {exc}")
            failed += 1
    found += temp_dir_leftovers(None, harness_pid)
    for leftover in found:
        if dry_run:
            echo(f"would remove {leftover.describe()}")
            continue
        try:
            leftover.remove()
        except Exception as exc:
            echo(f"error: could not remove {leftover.describe()}: {exc}")
            failed += 1
        else:
            echo(f"removed {leftover.describe()}")
            removed += 1
    if engine is not None:
        with contextlib.suppress(Exception):
            engine[0].close()
    if dry_run:
        echo(f"{len(found)} leftover(s) of dead runs (dry run: nothing removed)")
    elif removed or not failed:
        echo(
            f"removed {removed} leftover(s) of dead runs"
            if removed
            else "nothing left by dead runs"
        )
    if use_docker and engine is None and not failed:
        echo("docker: no engine configured here (DOCKER_HOST); containers not checked")
    return EXIT_FAILED if failed else EXIT_CLEAN


@click.command("cleanup")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option(
    "--harness-pid",
    type=click.IntRange(1),
    default=None,
    help="Only what the (dead) harness with this PID left.",
)
@click.option(
    "--docker/--no-docker",
    "use_docker",
    default=True,
    show_default=True,
    help="Also look for containers and networks of docker runs.",
)
@click.option(
    "--docker-host",
    default=None,
    metavar="URL",
    help="Docker engine (default: DOCKER_HOST, else the repository's var/docker/env).",
)
def cleanup_command(
    dry_run: bool, harness_pid: int | None, use_docker: bool, docker_host: str | None
) -> None:
    """Remove what dead runs left: their node and workload processes, their containers and
    networks (docker launcher) and their temp dirs.

    Only what names a harness that is gone is touched: a running harness's things, nodes of
    `txnchaos cluster up` and anything another host's harness made are kept. Prints one
    line per thing removed. Exit codes: 0 done (or nothing to do), 2 something could not
    be removed or checked.
    """
    code = run_cleanup(
        dry_run=dry_run,
        harness_pid=harness_pid,
        use_docker=use_docker,
        docker_host=docker_host,
        echo=click.echo,
    )
    if code:
        raise SystemExit(code)
