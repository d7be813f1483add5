"""An end-to-end `txnchaos run scenarios/smoke.yaml`: the run directory holds a complete
history and fault log, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import child_commands
from txnchaos.harness.run.scenario import load_scenario

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def txnchaos(*args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        **kw,  # type: ignore[arg-type]
    )


def node_pids(run_dir: Path) -> list[int]:
    state = json.loads((run_dir / "cluster-state.json").read_text())
    return [n["pid"] for n in state["nodes"] if n["pid"]]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_smoke_run_records_everything(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = txnchaos("run", "scenarios/smoke.yaml", "--out", str(out), "--no-analyze")
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output

    info = json.loads((out / "run.json").read_text())
    assert info["complete"] is True and info["seed"] == 1 and info["scenario"] == "smoke"
    # the scenario as it ran, so that the run can be repeated or shrunk from its directory
    assert load_scenario(out / "scenario.yaml") == load_scenario("scenarios/smoke.yaml")
    history = pq.read_table(out / "history.parquet").to_pylist()
    types = {r["type"] for r in history}
    assert {"init", "send", "commit", "abort", "poll", "send_offsets", "final_read"} <= types
    assert all(
        r["offset"] is not None for r in history if r["type"] == "send" and r["outcome"] == "ok"
    )

    faults = [json.loads(line) for line in (out / "faults.jsonl").read_text().splitlines()]
    kinds = {f["kind"] for f in faults}
    assert {"delay", "kill", "restart", "crash_producer"} <= kinds, kinds
    for f in faults:
        assert f["end"] >= f["start"]
    schedule = json.loads((out / "schedule.json").read_text())
    assert [s["kind"] for s in schedule][:2] == ["delay", "drop_request"]
    # the nemesis log: one apply step per scheduled action, and none of them failed
    steps = [json.loads(line) for line in (out / "nemesis.jsonl").read_text().splitlines()]
    applied = sorted(x["action"] for x in steps if x["step"] == "apply")
    assert applied == list(range(len(schedule))), steps
    assert [x for x in steps if x["error"]] == []

    final = json.loads((out / "final_state.json").read_text())
    assert {p["topic"] for p in final["partitions"]} == {"events", "copies"}
    assert all(p["lso"] == p["high_watermark"] for p in final["partitions"])
    # unfinished as the coordinator sees them: none stuck completing; a user stopped between
    # AddPartitionsToTxn and its first record leaves an Ongoing one with nothing written (no
    # partition open, above), which the coordinator aborts at its timeout
    listed = final["coordinator_transactions"]
    assert listed is not None and all(t["state"] == "Ongoing" for t in listed), listed
    copied = {g["partition"] for g in final["group_offsets"] if g["group_id"] == "copiers"}
    assert copied == {0, 1, 2, 3}  # the copier group's committed offsets, for its input
    metric_names = set(pq.read_table(out / "metrics.parquet", columns=["name"])["name"].to_pylist())
    assert {"txnchaos.lso", "txnchaos.high_watermark", "LastStableOffsetLag"} <= metric_names
    assert not [p for p in node_pids(out) if alive(p)]


def test_ctrl_c_stops_everything_and_keeps_a_partial_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = txnchaos("run", "scenarios/smoke.yaml", "--out", str(out), "--no-analyze")
    deadline = time.monotonic() + 120
    while not (out / "workload-stats.jsonl").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
        time.sleep(0.2)
    pids = node_pids(out)
    assert pids and all(alive(p) for p in pids)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2, output
    assert "interrupted" in output
    assert not [p for p in pids if alive(p)]
    info = json.loads((out / "run.json").read_text())
    assert info["complete"] is False and info["interrupted"] is True
    # what was recorded is compacted and analysable
    assert (out / "history.parquet").exists()
    assert not [p for p in child_commands(os.getpid()) if "workload.runner" in p]
