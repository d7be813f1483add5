"""`txnchaos run --workers 2` of a load scenario with a rate profile: locust's master and two
worker processes run the users, each worker writes its users' histories, the files merge into
one history, and the verdict and report give latency percentiles and committed transactions/s."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import child_commands
from txnchaos.harness.workload.web import read_started

from .test_run_smoke import alive, node_pids, txnchaos

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCENARIO = """\
name: tiny-load
seed: 2
duration: 8
cluster: {launcher: local, brokers: 1, coordinators: 0, proxied: false}
workload:
  topics:
    - {name: events, partitions: 2}
  users:
    - {kind: transactional_producer, name: writer, count: 2, topics: [events],
       records_per_txn: 3, rate: 20}
    - {kind: read_committed_consumer, name: reader, topics: [events], group_id: readers}
load_shape:
  stages:
    - {kind: ramp, duration: 3, to: 1.0}
    - {kind: spike, duration: 3, to: 2.0}
final: {quiescence_timeout: 30, read_timeout: 60}
"""


@pytest.mark.timeout(600)
def test_workers_write_histories_that_merge_and_the_verdict_has_percentiles(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "tiny-load.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    # the plain rules judge it: the distributed workload, not the engine, is under test here
    proc = txnchaos(
        "run", str(scenario), "--out", str(out), "--workers", "2", "--engine", "reference"
    )
    output, _ = proc.communicate(timeout=540)
    assert proc.returncode == 0, output

    # one history file per user process, named after its worker; all of them in the history
    files = sorted(p.stem for p in (out / "history").glob("*.jsonl"))
    workers = {m.group(1) for f in files if (m := re.match(r"\w+-(w\d+)-\d+$", f))}
    assert workers == {"w0", "w1"}, files
    history = pq.read_table(out / "history.parquet", columns=["process", "type", "outcome"])
    processes = set(history["process"].to_pylist())
    assert {f for f in files if f != "final-reader"} <= processes
    # the spike ran twice the writers the workload names
    assert len([f for f in files if f.startswith("writer-")]) == 4, files
    info = json.loads((out / "run.json").read_text())
    assert info["locust_master"].startswith("127.0.0.1:")
    # the fault clock and the report's time axis start when the master started the users
    assert info["workload_started_ns"] == read_started(out / "logs" / "workload.started")

    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "valid", verdict
    stats = verdict["stats"]
    assert stats["committed_txn_per_s"] > 0
    for typ in ("send", "commit", "poll"):
        p = stats["latency_ms"][typ]
        assert p["n"] > 0 and 0 < p["p50_ms"] <= p["p95_ms"] <= p["p99_ms"], (typ, p)
    html = (out / "report.html").read_text()
    assert 'id="latency-percentiles"' in html and "<td>commit</td>" in html

    # nothing is left running: nodes, master, workers
    assert not [p for p in node_pids(out) if alive(p)]
    assert not [c for c in child_commands(os.getpid()) if "workload.runner" in c]
