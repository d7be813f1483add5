"""The executor says when the chaos did not happen (every step in nemesis.jsonl, errors
included), retries failed heals in its final heal, and keeps a late fault's duration.

The launcher here is :class:`ClusterHandle` itself (its fault log, its pause spans) over nodes
that are states in a dict: what a node operation does is the launcher's business, what the
executor does when one fails, blocks or runs late is what is tested."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from txnchaos.analysis.nemesis_outcome import nemesis_section
from txnchaos.harness.launch.base import (
    KILL,
    PAUSE,
    RESTART,
    RESUME,
    ClusterHandle,
    ClusterSpec,
    LaunchError,
    NodeInfo,
)
from txnchaos.harness.nemesis.executor import NemesisExecutor
from txnchaos.harness.nemesis.schedule import ScheduledFault
from txnchaos.harness.workload.config import load_workload
from txnchaos.rundir.fault_log import read_fault_log
from txnchaos.rundir.outcome_log import read_outcomes

pytestmark = pytest.mark.timeout(60)


class StateHandle(ClusterHandle):
    """Nodes as states ("up", "paused", "down"); ``resume_failures`` resumes fail before one
    works; a restart of a node in ``slow_restarts`` waits for its event."""

    launcher = "states"
    capabilities = frozenset({KILL, PAUSE, RESUME, RESTART})

    def __init__(self, run_dir: Path, nodes: list[int]) -> None:
        super().__init__(run_dir, ClusterSpec(proxied=False))
        self.state = dict.fromkeys(nodes, "up")
        self.resume_failures = 0
        self.slow_restarts: dict[int, threading.Event] = {}

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:1"

    @property
    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(id=n, role="broker", host="127.0.0.1", port=1) for n in self.state]

    def _kill(self, node_id: int) -> None:
        self.state[node_id] = "down"

    def _pause(self, node_id: int) -> None:
        if self.state[node_id] != "up":
            raise LaunchError(f"node {node_id} is not running; nothing to pause")
        self.state[node_id] = "paused"

    def _resume(self, node_id: int) -> None:
        if self.resume_failures:
            self.resume_failures -= 1
            raise LaunchError(f"unpausing node {node_id} timed out")
        self.state[node_id] = "up"

    def _restart(self, node_id: int) -> None:
        if node_id in self.slow_restarts:
            assert self.slow_restarts[node_id].wait(30)
        self.state[node_id] = "up"

    def _stop(self) -> None:
        pass


def _executor(
    tmp_path: Path, handle: StateHandle, schedule: list[ScheduledFault], **kw: float
) -> NemesisExecutor:
    workload = load_workload({"topics": [{"name": "t"}], "users": []})
    return NemesisExecutor(schedule, handle, workload=workload, run_dir=tmp_path, seed=1, **kw)


def _finish(executor: NemesisExecutor) -> None:
    """Let the schedule run out, then heal."""
    assert executor._thread is not None
    executor._thread.join(30)
    executor.heal()


def _steps(run_dir: Path) -> list[tuple[int, str, str | None]]:
    lines, note = read_outcomes(run_dir)
    assert lines is not None and note is None
    return [(x["action"], x["step"], x["error"]) for x in lines]


def test_a_fault_that_fails_is_recorded_and_counted(tmp_path: Path) -> None:
    handle = StateHandle(tmp_path, [1, 2])
    schedule = [
        ScheduledFault(at=0.0, kind="kill", duration=0.2, node=2),
        ScheduledFault(at=0.05, kind="pause", duration=0.1, node=2),  # on a killed node
    ]
    executor = _executor(tmp_path, handle, schedule)
    executor.start()
    _finish(executor)

    steps = _steps(tmp_path)
    assert (0, "apply", None) in steps and (0, "heal", None) in steps
    assert (1, "apply", "node 2 is not running; nothing to pause") in steps
    assert not any(a == 1 and s != "apply" for a, s, _ in steps)  # nothing to heal
    assert len(executor.stats.errors) == 1 and "pause" in executor.stats.errors[0]
    section = nemesis_section([f.model_dump() for f in schedule], read_outcomes(tmp_path)[0])
    assert section is not None
    assert {k: section[k] for k in ("scheduled", "applied", "failed", "not_reached")} == {
        "scheduled": 2,
        "applied": 1,
        "failed": 1,
        "not_reached": 0,
    }
    assert [(e["action"], e["kind"], e["step"]) for e in section["errors"]] == [
        (1, "pause", "apply")
    ]


def test_a_failed_heal_stays_in_effect_and_the_final_heal_retries_it(tmp_path: Path) -> None:
    handle = StateHandle(tmp_path, [1])
    handle.resume_failures = 1
    schedule = [ScheduledFault(at=0.0, kind="pause", duration=0.05, node=1)]
    executor = _executor(tmp_path, handle, schedule)
    executor.start()
    assert executor._thread is not None
    executor._thread.join(30)
    (still,) = executor.active()
    assert still.heal_failed and handle.state[1] == "paused"

    executor.heal()
    assert handle.state[1] == "up" and executor.active() == []
    assert _steps(tmp_path) == [
        (0, "apply", None),
        (0, "heal", "unpausing node 1 timed out"),
        (0, "heal_retry", None),
    ]
    section = nemesis_section([schedule[0].model_dump()], read_outcomes(tmp_path)[0])
    assert section is not None
    assert (section["heals_retried"], section["unhealed"], len(section["errors"])) == (1, 0, 1)
    executor.heal()  # the orchestrator's cleanup heals again: nothing more is done
    assert len(_steps(tmp_path)) == 3


def test_a_late_fault_keeps_its_duration_and_later_node_faults_wait_for_it(
    tmp_path: Path,
) -> None:
    handle = StateHandle(tmp_path, [1, 2, 3])
    restarted = handle.slow_restarts[2] = threading.Event()
    schedule = [
        ScheduledFault(at=0.0, kind="restart", duration=0.0, node=2),
        ScheduledFault(at=0.1, kind="pause", duration=0.5, node=1),
        ScheduledFault(at=0.6, kind="pause", duration=0.1, node=3),  # after the first ends
    ]
    executor = _executor(tmp_path, handle, schedule, window_end=10.0)
    executor.start()
    while executor._now() < 0.7:  # the restart holds the executor past the pause's window
        time.sleep(0.05)
    restarted.set()
    _finish(executor)

    lines, _ = read_outcomes(tmp_path)
    assert lines is not None
    step = {(x["action"], x["step"]): x for x in lines}
    assert all(x["error"] is None for x in lines)
    applied, healed = step[(1, "apply")], step[(1, "heal")]
    assert healed["at"] >= 1.2  # applied at 0.7 s or later: healed 0.5 s after that
    (pause,) = [r for r in read_fault_log(tmp_path) if r["target"]["node"] == 1]
    assert pause["kind"] == "pause" and pause["end"] - pause["start"] >= 0.4
    assert pause["start"] >= applied["start"]
    assert step[(2, "apply")]["start"] >= healed["end"]  # never two node faults at once


def test_a_late_heal_is_cut_at_the_end_of_the_fault_window(tmp_path: Path) -> None:
    pause = ScheduledFault(at=1.0, kind="pause", duration=2.0, node=1)
    executor = _executor(tmp_path, StateHandle(tmp_path, [1]), [pause], window_end=4.0)
    assert executor._heal_time(pause, 1.0) == 3.0  # on time: its scheduled end
    assert executor._heal_time(pause, 1.5) == 3.5  # late: its full duration
    assert executor._heal_time(pause, 2.5) == 4.0  # cut at the window's end
