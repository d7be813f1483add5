"""Fixtures for the workload tests.

The locust-based runner monkey-patches its process with gevent, so it is never imported into
the pytest process: tests run it as ``python -m txnchaos.harness.workload.runner`` in a
subprocess and inspect the run directory it leaves behind.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_cluster
from txnchaos.harness.launch.local import LocalCluster

#: Coordinator settings that let timed-out transactions be aborted within seconds.
FAST_TXN_SETTINGS = ["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"]


@pytest.fixture(scope="session")
def wl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One single-node cluster for every workload test (each test uses its own topics)."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("wl-cluster"), brokers=1, settings=FAST_TXN_SETTINGS
    )
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def wl_bootstrap(wl_cluster: LocalCluster) -> str:
    return str(wl_cluster.state()["bootstrap"])


@pytest.fixture
def uniq() -> str:
    return uuid.uuid4().hex[:8]


def runner_cmd(cfg: Path, bootstrap: str, run_dir: Path, *extra: str) -> list[str]:
    """The locust runner CLI's command line (quiet: its final statistics only)."""
    return [
        sys.executable,
        "-m",
        "txnchaos.harness.workload.runner",
        "--config",
        str(cfg),
        "--bootstrap",
        bootstrap,
        "--run-dir",
        str(run_dir),
        "--quiet",
        *extra,
    ]


def run_workload(
    config: dict[str, Any],
    run_dir: Path,
    bootstrap: str,
    duration_s: float,
    *extra: str,
    timeout_s: float = 120.0,
    until: Callable[[Path], bool] | None = None,
) -> dict[str, Any]:
    """Run the locust runner CLI in a subprocess; returns its final statistics.

    Without ``until`` the run lasts ``duration_s``. With it, the run lasts at least
    ``duration_s`` and then until ``until(run_dir)`` holds (or ``timeout_s`` passes, which fails
    the test): a test that needs some operations to have happened waits for them instead of
    hoping a fixed duration is long enough on a busy machine. The runner is then stopped as
    the harness stops it (SIGTERM: a clean stop with its final statistics)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = run_dir.parent / f"{run_dir.name}-workload.json"
    cfg.write_text(json.dumps(config))
    if until is None:
        proc = subprocess.run(
            runner_cmd(cfg, bootstrap, run_dir, *_timing(duration_s), *extra),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        out = proc.stdout
        return json.loads(out[out.index("{") :])
    return _run_until(cfg, run_dir, bootstrap, duration_s, extra, timeout_s, until)


def _timing(duration_s: float) -> tuple[str, ...]:
    return ("--duration", str(duration_s), "--seed", "7")


def _run_until(
    cfg: Path,
    run_dir: Path,
    bootstrap: str,
    duration_s: float,
    extra: tuple[str, ...],
    timeout_s: float,
    until: Callable[[Path], bool],
) -> dict[str, Any]:
    err_path = run_dir.parent / f"{run_dir.name}-runner.log"
    started = time.monotonic()
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            # the duration is only a backstop: the test stops the run
            runner_cmd(cfg, bootstrap, run_dir, *_timing(timeout_s + 60), *extra),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        while time.monotonic() - started < duration_s or not until(run_dir):
            assert proc.poll() is None, f"the runner ended early: {err_path.read_text()[-4000:]}"
            assert time.monotonic() - started < timeout_s, (
                f"the workload's awaited operations did not happen within {timeout_s:.0f} s"
            )
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the runner's clean stop
        out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, err_path.read_text()[-4000:]
    return json.loads(out[out.index("{") :])
