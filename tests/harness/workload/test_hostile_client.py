"""The hostile_client kind: its flows by transaction.version, the scenario check that refuses a
KIP-890-part-2 flow under the old protocol, and a real run (scenarios/hostile-smoke.yaml) where
our cluster refuses every probe kind and the verdict is valid."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from txnchaos.harness.workload.config import WorkloadConfigError, load_workload
from txnchaos.harness.workload.kinds.hostile_client import TV2_ONLY, HostileClientSpec
from txnchaos.harness.workload.probes import EXPECTED

ROOT = Path(__file__).resolve().parents[3]
TOPICS = [{"name": "events", "partitions": 2}]


def test_default_flows_follow_the_transaction_version() -> None:
    tv1 = HostileClientSpec(topics=["events"], transaction_version=1)
    tv2 = HostileClientSpec(topics=["events"], transaction_version=2)
    assert not TV2_ONLY & set(tv1.flows())
    assert set(tv2.flows()) >= TV2_ONLY
    assert set(tv2.flows()) - set(tv1.flows()) == TV2_ONLY


def test_a_tv2_only_flow_under_the_old_protocol_is_refused() -> None:
    user = {
        "kind": "hostile_client",
        "topics": ["events"],
        "transaction_version": 1,
        "probes": ["sequence_gap", "end_txn_into_next"],
    }
    with pytest.raises(WorkloadConfigError, match="need transaction_version 2"):
        load_workload({"topics": TOPICS, "users": [user]})
    user["probes"] = ["sequence_gap", "zombie"]
    load_workload({"topics": TOPICS, "users": [user]})


@pytest.mark.integration
@pytest.mark.slow
def test_our_cluster_refuses_every_probe(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "scenarios/hostile-smoke.yaml", "--engine", "reference", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "valid", verdict
    history = pq.read_table(out / "history.parquet").to_pylist()
    probes = [r for r in history if r["type"] == "probe"]
    outcomes = Counter((r["key"], r["outcome"]) for r in probes)
    # every probe kind was sent, and none was accepted
    assert {k for k, _ in outcomes} == set(EXPECTED)
    assert not [k for k, o in outcomes if o == "ok"], outcomes
    assert sum(n for (_, o), n in outcomes.items() if o == "fail") >= len(EXPECTED)
