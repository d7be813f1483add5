"""``stale_marker`` on real nodes: every copy of an earlier marker the rule delivers is one
the brokers must refuse, and do (the unmutated run is valid, each copy ``fenced``); with a
broker that takes a TV2 marker at the open transaction's epoch for a retry
(``mark-tv2-retry-closes-open-txn`` of bench/mutants.py) the same run is judged invalid. Both
runs through bench/mutation.py, which puts the mutant into a scratch copy the nodes import.
And across a real restart of the coordinator node: the marker its previous process sent is
delivered again (an older coordinator incarnation, the restart told the proxies) once the
new process's marker is written, and refused; a coordinator that keeps its coordinator epoch
across the restart (``coord-epoch-not-bumped-on-load``, its nodes importing the scratch
copy) gets it written."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from txnchaos.harness.clients import Producer, ProducerConfig
from txnchaos.harness.launch.base import ClusterSpec
from txnchaos.harness.launch.local_launcher import LocalHandle, LocalLauncher

from .txn_clients_support import COORDINATOR_ID, committed_values, create_topic, unique

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


NOT_BUMPED = "coord-epoch-not-bumped-on-load"


@pytest.fixture
def proxied(
    mutant: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalHandle]:
    """A broker and a coordinator node, proxied; with a ``mutant``, the nodes import the
    scratch copy of the cluster bench/mutation.py makes with it."""
    if mutant is not None:
        sys.path.insert(0, str(BENCH))
        try:
            found = importlib.util.spec_from_file_location("mutation", BENCH / "mutation.py")
            assert found is not None and found.loader is not None
            mutation = importlib.util.module_from_spec(found)
            sys.modules["mutation"] = mutation  # dataclasses look their module up there
            found.loader.exec_module(mutation)
        finally:
            sys.path.remove(str(BENCH))
        tree = mutation.apply_mutant(
            mutation.BY_NAME[mutant], mutation.ROOT / "cluster", tmp_path / "tree"
        )
        path = [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    spec = ClusterSpec(brokers=1, coordinators=1, seed=1)
    handle = LocalLauncher().start(spec, tmp_path / "run")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.parametrize("mutant", [None, NOT_BUMPED])
def test_a_restarted_coordinators_old_marker_is_delivered_again_and_refused(
    mutant: str | None, proxied: LocalHandle
) -> None:
    """A TV1 producer keeps its epoch across the coordinator's restart: only the restart
    (the coordinator's new incarnation) tells its first transaction's marker from the
    markers after it. Transaction 1's commit marker comes from the coordinator's first
    process; transaction 2's from the restarted one; transaction 3's first write brings
    transaction 1's copy, which the broker refuses (its coordinator epoch is older), unless
    the restarted coordinator kept its coordinator epoch (the mutant): then it is written."""
    fleet = proxied.fleet
    assert fleet is not None
    fleet.add_rule({"kind": "stale_marker"})
    bootstrap = proxied.bootstrap
    topic = unique("incarnation")
    create_topic(bootstrap, topic, 1)

    def log() -> list[dict]:
        text = (proxied.run_dir / "faults.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]

    async def transaction(p: Producer, value: bytes) -> None:
        await p.begin_transaction()
        sent = p.send(topic, 0, value)
        await p.flush()
        await sent
        await p.commit_transaction(60)

    async def main() -> None:
        p = Producer(
            ProducerConfig(bootstrap, transactional_id=unique("incarnation"), transaction_version=1)
        )
        await p.init_transactions(60)
        try:
            epoch = p.ids.epoch
            await transaction(p, b"1")
            # its marker written by the first process (else the restarted one sends it)
            await asyncio.to_thread(
                committed_values, bootstrap, topic, [0], until=lambda v: v == [b"1"], settle=0
            )
            await asyncio.to_thread(proxied.restart, COORDINATOR_ID)
            await transaction(p, b"2")
            assert not [f for f in log() if f["kind"] == "stale_marker"]
            await transaction(p, b"3")
            assert (p.transaction_version, p.ids.epoch) == (1, epoch)
        finally:
            await p.close()

    asyncio.run(main())
    copies = [f["params"] for f in log() if f["kind"] == "stale_marker"]
    assert copies, "transaction 1's marker was not delivered again"
    for copy in copies:  # transaction 1's, as often as its first process sent it
        assert copy["stale_because"] == (
            f"older coordinator incarnation: n{COORDINATOR_ID} incarnation 0, a marker of "
            "incarnation 1 written since"
        )
        assert copy["marker"]["source"] == {"node": COORDINATOR_ID, "incarnation": 0}
        if mutant is not None:
            assert (copy["result"], copy["error"]) == ("written", "NONE")
        else:
            assert (copy["result"], copy["error"]) == ("fenced", "TRANSACTION_COORDINATOR_FENCED")
    assert committed_values(bootstrap, topic, [0]) == [b"1", b"2", b"3"]
