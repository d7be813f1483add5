"""``stale_marker`` on real nodes: every copy of an earlier marker the rule delivers is one
the brokers must refuse, and do (the unmutated run is valid, each copy ``fenced``); with a
broker that takes a TV2 marker at the open transaction's epoch for a retry
(``mark-tv2-retry-closes-open-txn`` of bench/mutants.py) the same run is judged invalid. Both
runs through bench/mutation.py, which puts the mutant into a scratch copy the nodes import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "bench"
MUTANT = "mark-tv2-retry-closes-open-txn"

#: our TV2 producer, aborting a third of its transactions after flushing them, and a reader;
#: the rule on every link for the whole workload
SCENARIO = {
    "name": "stale-marker",
    "seed": 1,
    "duration": 8,
    "cluster": {"launcher": "local", "brokers": 2, "coordinators": 1, "proxied": True},
    "workload": {
        "topics": [{"name": "events", "partitions": 2}],
        "users": [
            {
                "kind": "tv2_producer",
                "name": "tv2-writer",
                "topics": ["events"],
                "records_per_txn": 3,
                "partitions_per_txn": 2,
                "abort_probability": 0.3,
                "flush_before_abort_probability": 1.0,
                "transaction_timeout_ms": 5000,
                "rate": 10,
            },
            {"kind": "read_committed_consumer", "name": "reader", "topics": ["events"]},
        ],
    },
    "nemesis": {"actions": [{"at": 0, "kind": "stale_marker", "duration": 7, "rule": {}}]},
    "final": {"quiescence_timeout": 30, "read_timeout": 30},
    "expect": {"verdict": "valid"},
}


def test_brokers_refuse_every_stale_copy_and_a_broker_that_takes_one_is_caught(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "stale-marker.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    out = tmp_path / "out"
    args = ["--mutants", MUTANT, "--baseline", "1", "--no-canary", "--engine", "reference"]
    args += ["--scenarios", str(scenario), "--out", str(out)]
    r = subprocess.run(
        [sys.executable, str(BENCH / "mutation.py"), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    clean = json.loads((out / "cells" / "none" / "stale-marker-seed1.json").read_text())
    assert clean["result"] == "valid", clean
    copies = [
        json.loads(line)["params"]
        for line in (Path(clean["run_dir"]) / "faults.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "stale_marker"
    ]
    assert copies, "no stale copy was delivered"
    assert {c["result"] for c in copies} == {"fenced"}, copies[:5]
    assert all(c["marker"]["transaction_version"] == 2 for c in copies)

    mutated = json.loads((out / "cells" / MUTANT / "stale-marker-seed1.json").read_text())
    assert mutated["result"] == "detected", mutated
    written = [
        json.loads(line)["params"]
        for line in (Path(mutated["run_dir"]) / "faults.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "stale_marker"
    ]
    assert any(c["result"] == "written" for c in written)
