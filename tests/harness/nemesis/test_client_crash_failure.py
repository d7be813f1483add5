"""A client crash that cannot be carried out is an error of the run, and leaves no process."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import child_commands
from txnchaos.harness.nemesis.executor import NemesisExecutor
from txnchaos.harness.nemesis.schedule import ScheduledFault
from txnchaos.harness.workload.config import load_workload
from txnchaos.rundir.outcome_log import read_outcomes

pytestmark = pytest.mark.timeout(120)


def test_a_client_that_never_reaches_its_hold_point_is_killed_and_reported(
    tmp_path: Path,
) -> None:
    # a port that refuses connections: the producer never initialises, so never says READY
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        bootstrap = f"127.0.0.1:{closed.getsockname()[1]}"
        workload = load_workload(
            {
                "topics": [{"name": "t", "partitions": 2}],
                "users": [{"kind": "transactional_producer", "topics": ["t"]}],
            }
        )
        handle: Any = SimpleNamespace(bootstrap=bootstrap, fleet=None)
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        fault = ScheduledFault(at=0.0, kind="crash_producer", duration=0.0)
        executor = NemesisExecutor([fault], handle, workload=workload, run_dir=run_dir, seed=1)
        executor.hold_timeout_s = 3.0
        executor.start()
        executor._stop.wait(0.5)
        executor.heal()  # waits for the crash worker

    assert len(executor.stats.errors) == 1, executor.stats.errors
    assert "no 'HOLD' within 3.0s" in executor.stats.errors[0]
    lines, _ = read_outcomes(run_dir)
    assert lines is not None
    assert [(x["action"], x["step"]) for x in lines] == [(0, "apply")]
    assert "no 'HOLD' within 3.0s" in lines[0]["error"]
    assert executor.active() == []
    clients = [c for c in child_commands(os.getpid()) if str(run_dir) in c]
    assert clients == [], "the client process was left running"
