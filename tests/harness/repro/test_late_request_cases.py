"""KIP-890's three late-request cases, the catalogue entries produce-after-abort,
produce-into-next-transaction and end-txn-into-next-transaction, in two runs instead of six:
the misbehaving user of each entry, as its scenario file has it, each on a topic of its own,
together in one run (real nodes, our producer, real confluent-kafka writers and readers).

With no defense (the entries' tv0 configuration: transaction.version 0 and
transaction.partition.verification.enable false) each entry's predicted checker flags
that user's records; at transaction.version 2 (every defense) the run is valid.
Verification alone (tv1), where the first case is closed and the other two are not, is
in the detection matrix (bench/detection.py, docs/repro.md). Both runs
are judged by the plain rules (`txnchaos run --engine reference`); the run without defense is
judged again by PySpark on the suite's shared session and held equal (both runs with
``TXNCHAOS_TEST_SPARK=all``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.repro.repro_runs import assert_engines_agree, spark_for
from txnchaos.analysis.analyze import analyze
from txnchaos.harness.repro.catalogue import SHIPPED, load_catalogue

pytestmark = pytest.mark.integration

ENTRIES = ["produce-after-abort", "produce-into-next-transaction", "end-txn-into-next-transaction"]
DURATION_S = 4


def late_user(entry: str) -> dict[str, Any]:
    """The entry's misbehaving user (the one with ``misbehavior.late_request``)."""
    data = yaml.safe_load((SHIPPED / f"{entry}.yaml").read_text())
    users = data["workload"]["users"]
    late = [u for u in users if u.get("misbehavior", {}).get("late_request", "none") != "none"]
    assert len(late) == 1, users
    return dict(late[0])


def tv_settings(tv: int) -> dict[str, Any]:
    """The settings the entries' ``tv<N>`` configuration runs with (the same in all three)."""
    catalogue = load_catalogue(SHIPPED)
    (settings,) = {
        json.dumps(catalogue[e].spec.configurations[f"tv{tv}"].settings, sort_keys=True)
        for e in ENTRIES
    }
    return dict(json.loads(settings))


def together(tv: int) -> dict[str, Any]:
    """One scenario with the three misbehaving users, user ``case<i>`` on topic ``t<i>``."""
    users: list[dict[str, Any]] = []
    topics = []
    for i, entry in enumerate(ENTRIES):
        topics.append({"name": f"t{i}", "partitions": 2})
        users.append({**late_user(entry), "name": f"case{i}", "topics": [f"t{i}"]})
    names = [t["name"] for t in topics]
    users.append({"kind": "read_committed_consumer", "name": "reader", "topics": names})
    return {
        "name": f"late-requests-tv{tv}",
        "seed": 1,
        "duration": DURATION_S,
        "cluster": {
            "launcher": "local",
            "brokers": 1,
            "coordinators": 1,
            "proxied": False,
            "settings": {**tv_settings(tv), "transaction.max.timeout.ms": 60000},
        },
        "workload": {"topics": topics, "users": users},
        # case 0's late record never ends: no long wait for it
        "final": {"quiescence_timeout": 5, "read_timeout": 20},
    }


def run(tv: int, tmp_path: Path) -> tuple[int, Path]:
    scenario = tmp_path / f"tv{tv}.yaml"
    scenario.write_text(yaml.safe_dump(together(tv), sort_keys=False))
    out = tmp_path / f"run-tv{tv}"
    command = ["run", str(scenario), "--out", str(out), "--engine", "reference"]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.returncode, out


def flagged_topics(run_dir: Path) -> dict[str, set[str]]:
    """checker -> the topics of the records (or partitions) its anomalies name."""
    verdict = analyze(run_dir, engine="reference", examples=100_000, write=False).to_json()
    out: dict[str, set[str]] = {}
    for name, checker in verdict["checkers"].items():
        for example in checker.get("examples", []):
            text = json.dumps(example["evidence"])
            out.setdefault(name, set()).update(
                f"t{i}" for i in range(len(ENTRIES)) if f'"topic": "t{i}"' in text
            )
    return out


def test_each_late_request_case_is_detected_without_defense(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    code, run_dir = run(0, tmp_path)
    assert code == 1
    assert_engines_agree(run_dir, spark_for("late-requests-tv0", request))
    flagged = flagged_topics(run_dir)
    catalogue = load_catalogue(SHIPPED)
    for i, entry in enumerate(ENTRIES):
        for checker in catalogue[entry].spec.configurations["tv0"].expect.anomalies:
            assert f"t{i}" in flagged.get(checker, set()), (entry, checker, flagged)


def test_the_epoch_per_transaction_closes_every_late_request_case(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    code, run_dir = run(2, tmp_path)
    assert_engines_agree(run_dir, spark_for("late-requests-tv2", request))
    verdict = json.loads((run_dir / "verdict.json").read_text())
    invalid = {n: c["counts"] for n, c in verdict["checkers"].items() if c["status"] == "invalid"}
    assert code == 0, invalid
