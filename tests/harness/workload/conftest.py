"""Fixtures for the workload tests.

The locust-based runner monkey-patches its process with gevent, so it is never imported into
the pytest process: tests run it as ``python -m txnchaos.harness.workload.runner`` in a
subprocess and inspect the run directory it leaves behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
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
) -> dict[str, Any]:
    """Run the locust runner CLI in a subprocess; returns its final statistics."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = run_dir.parent / f"{run_dir.name}-workload.json"
    cfg.write_text(json.dumps(config))
    proc = subprocess.run(
        runner_cmd(cfg, bootstrap, run_dir, "--duration", str(duration_s), "--seed", "7", *extra),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    return json.loads(out[out.index("{") :])
