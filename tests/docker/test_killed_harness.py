"""Issue 39 / issue 35 item 10: a harness running a docker cluster killed with SIGKILL
leaves nothing behind. Its watchdog removes the run's containers and network; when the
watchdog is gone too, `txnchaos cleanup` finds them by their labels (run id, harness pid,
host, start time) and removes them, naming each."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Docker  # tests/docker/conftest.py (fixtures: docker, node_image)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

HARNESS = textwrap.dedent(
    """
    import json, sys, threading
    from pathlib import Path
    from txnchaos.harness.launch.base import ClusterSpec
    from txnchaos.harness.launch.docker import DockerLauncher

    handle = DockerLauncher(image=sys.argv[2]).start(ClusterSpec(brokers=1), Path(sys.argv[1]))
    print(json.dumps({
        "run_id": handle.run_id,
        "watchdog": handle.watchdog.proc.pid,
        "network": handle.network.name,
    }), flush=True)
    threading.Event().wait()
    """
)


def run_objects(docker: Docker, run_id: str) -> list[str]:
    """Names of the containers and networks labelled with ``run_id``."""
    label = f"label=org.txnchaos.run={run_id}"
    containers = docker("ps", "-a", "--filter", label, "--format", "{{.Names}}").stdout.split()
    networks = docker("network", "ls", "--filter", label, "--format", "{{.Name}}").stdout.split()
    return containers + networks


@pytest.fixture
def harness(
    docker: Docker, node_image: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(tmp_path / "run"), node_image],
        stdout=subprocess.PIPE,
        text=True,
        env=docker.env,
        cwd=REPO,
    )
    info: dict[str, Any] = {}
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        yield proc, info
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if info:  # pass or fail, nothing of the run stays
            for name in run_objects(docker, info["run_id"]):
                docker("rm", "--force", "--volumes", name, check=False)
                docker("network", "rm", name, check=False)
            if info.get("watchdog"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info["watchdog"], signal.SIGKILL)


def wait_for(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_the_watchdog_removes_a_killed_harness_s_containers(
    docker: Docker, harness: tuple[subprocess.Popen[str], dict[str, Any]]
) -> None:
    proc, info = harness
    objects = run_objects(docker, info["run_id"])
    assert info["network"] in objects and len(objects) == 2, objects
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: run_objects(docker, info["run_id"]) == [], "the containers outlived it")


def test_cleanup_removes_what_a_killed_harness_and_watchdog_left(
    docker: Docker, harness: tuple[subprocess.Popen[str], dict[str, Any]]
) -> None:
    proc, info = harness
    os.kill(info["watchdog"], signal.SIGKILL)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    objects = run_objects(docker, info["run_id"])
    assert len(objects) == 2, objects  # a container and the network, with nobody to remove them
    result = subprocess.run(
        [sys.executable, "-m", "txnchaos.harness.cli", "cleanup", "--harness-pid", str(proc.pid)],
        capture_output=True,
        text=True,
        env=docker.env,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in objects:
        assert name in result.stdout, result.stdout
    assert f"harness pid {proc.pid}" in result.stdout
    assert run_objects(docker, info["run_id"]) == []
