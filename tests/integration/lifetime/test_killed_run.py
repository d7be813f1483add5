"""Issue 35, item 10: `txnchaos run` killed with SIGKILL leaves no process behind: its
nodes and its workload process die with it (launch/lifetime.py), and what names a dead
harness is what `txnchaos cleanup` would remove (nothing, here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from txnchaos.harness.launch.owner import OWNER_ENV

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]

SCENARIO = """
name: killed-run
seed: 1
duration: 300
cluster:
  launcher: local
  brokers: 1
  coordinators: 1
workload:
  topics:
    - {name: events, partitions: 2}
  users:
    - kind: transactional_producer
      name: writer
      count: 1
      topics: [events]
      records_per_txn: 2
      rate: 5
"""


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def owned_by(harness: int) -> list[int]:
    """PIDs of live processes whose environment names ``harness`` as their owner."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in environ:
            if item.startswith(OWNER_ENV.encode() + b"="):
                fields = item.split(b"=", 1)[1].decode().split(":")
                if len(fields) >= 3 and fields[-2] == str(harness) and alive(int(entry.name)):
                    out.append(int(entry.name))
    return out


def test_a_run_killed_with_sigkill_leaves_no_process(tmp_path: Path) -> None:
    scenario = tmp_path / "killed.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "txnchaos.jobs.cli",
            "run",
            str(scenario),
            "--out",
            str(out),
            "--no-analyze",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    leftovers: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not (out / "workload-stats.jsonl").exists():
            assert time.monotonic() < deadline and run.poll() is None, "the run never started"
            time.sleep(0.2)
        state = json.loads((out / "cluster-state.json").read_text())
        nodes = [n["pid"] for n in state["nodes"] if n["pid"]]
        children = owned_by(run.pid)
        assert set(nodes) < set(children), (nodes, children)  # the workload is one more
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        # Every process the harness owns dies, those it had at the kill and any started
        # after that look (a user's own process, spawned by the workload as it starts: it
        # dies with the workload, a moment after it)
        deadline = time.monotonic() + 30
        while leftovers := sorted(set(owned_by(run.pid)) | {p for p in children if alive(p)}):
            assert time.monotonic() < deadline, f"outlived the harness: {leftovers} ({children})"
            time.sleep(0.1)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in owned_by(run.pid):  # never leave a process behind, pass or fail
            os.kill(pid, signal.SIGKILL)
