"""`txnchaos cleanup` (issue 39, issue 35 item 10): what names a dead harness (processes
by their environment, temp dirs by their owner file) is removed and named, what names a
live one is kept, --dry-run removes nothing. Tests always pass --harness-pid: other
people's leftovers on this machine are not theirs to remove."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from txnchaos.harness.launch.owner import (
    OWNER_ENV,
    OWNER_FILE,
    Owner,
    start_time,
    this_harness,
    this_host,
)

ROOT = Path(__file__).resolve().parents[2]


def owner_of(proc: subprocess.Popen[bytes]) -> Owner:
    started = start_time(proc.pid)
    assert started is not None
    return Owner(this_host(), proc.pid, started)


def sleeper(owner: Owner | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if owner is not None:
        env[OWNER_ENV] = owner.token()
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], env=env, stdin=subprocess.DEVNULL
    )


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def cleanup(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnchaos.harness.cli", "cleanup", "--no-docker", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
        cwd=ROOT,
        timeout=120,
    )


def owned_dir(root: Path, name: str, owner: Owner) -> Path:
    path = root / name
    path.mkdir()
    (path / OWNER_FILE).write_text(owner.token())
    (path / "data").write_text("x")
    return path


def test_cleanup_removes_what_a_dead_harness_left(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    harness = sleeper()
    procs.append(harness)
    dead = owner_of(harness)
    living_harness = sleeper()
    procs.append(living_harness)
    live = owner_of(living_harness)
    orphan = sleeper(dead)
    kept = sleeper(live)
    procs += [orphan, kept]
    dead_dir = owned_dir(tmp_path, "txnchaos-demo-dead", dead)
    live_dir = owned_dir(tmp_path, "txnchaos-demo-live", live)
    harness.kill()
    harness.wait()

    dry = cleanup(tmp_path, "--dry-run", "--harness-pid", str(dead.pid))
    assert dry.returncode == 0, dry.stderr
    assert f"would remove process {orphan.pid}" in dry.stdout
    assert f"would remove temp dir {dead_dir}" in dry.stdout
    assert orphan.poll() is None and dead_dir.exists()

    done = cleanup(tmp_path, "--harness-pid", str(dead.pid))
    assert done.returncode == 0, done.stderr
    assert f"removed process {orphan.pid}" in done.stdout
    assert f"removed temp dir {dead_dir}" in done.stdout
    assert f"harness pid {dead.pid}" in done.stdout
    assert "removed 2 leftover(s) of dead runs" in done.stdout
    assert orphan.wait(10) == -signal.SIGKILL
    assert not dead_dir.exists()

    # a live harness's things stay, even when asked for by its pid
    again = cleanup(tmp_path, "--harness-pid", str(live.pid))
    assert again.returncode == 0 and "nothing left" in again.stdout, again.stdout
    assert kept.poll() is None and live_dir.exists()


def test_a_reused_pid_is_not_the_owner() -> None:
    me = this_harness()
    assert me.alive()
    assert me.start is not None
    assert not Owner(me.host, me.pid, me.start + 1).alive()
    assert Owner("another-host", 1, 1).alive()  # cannot be checked from here: kept
    assert Owner.parse(me.token()) == me
    assert Owner.parse("garbage") is None
    assert Owner.from_labels(me.labels()) == me
