"""The tv2_producer / tv2_copier user kinds reach everywhere a kind is looked up: the workload
config, the workers, the scenario's crash-fault checks and the nemesis's crash targets (the
locust user bases are checked in a subprocess: importing locust patches the process with
gevent)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from txnchaos.harness.clients.config import Misbehavior
from txnchaos.harness.run.scenario import parse_scenario
from txnchaos.harness.workload.config import WorkloadConfigError, load_workload
from txnchaos.harness.workload.kinds.registry import crash_targets, user_kind
from txnchaos.harness.workload.kinds.tv2_copier import Tv2CopierSpec, Tv2CopierWorker
from txnchaos.harness.workload.kinds.tv2_producer import (
    Tv2ProducerSpec,
    Tv2ProducerWorker,
    our_producer_config,
)
from txnchaos.harness.workload.workers import WorkerContext

WORKLOAD = {
    "topics": [{"name": "events", "partitions": 4}, {"name": "copies", "partitions": 2}],
    "users": [
        {"kind": "tv2_producer", "topics": ["events"], "transaction_version": 0},
        {"kind": "tv2_copier", "input_topics": ["events"], "output_topic": "copies"},
    ],
}


def test_config_and_workers() -> None:
    cfg = load_workload(WORKLOAD)
    producer, copier = cfg.users
    assert isinstance(producer, Tv2ProducerSpec) and producer.transaction_version == 0
    assert isinstance(copier, Tv2CopierSpec) and copier.transaction_version is None
    assert cfg.process_prefix(producer) == user_kind("tv2_producer").prefix == "tv2-producer"
    assert user_kind("tv2_producer").worker is Tv2ProducerWorker
    assert user_kind("tv2_copier").worker is Tv2CopierWorker
    bad = {
        **WORKLOAD,
        "users": [{"kind": "tv2_producer", "topics": ["events"]} | {"transaction_version": 3}],
    }
    with pytest.raises(WorkloadConfigError, match="transaction_version"):
        load_workload(bad)


def test_crash_faults_accept_the_new_kinds() -> None:
    scenario = parse_scenario(
        {
            "name": "x",
            "workload": WORKLOAD,
            "nemesis": {
                "actions": [
                    {"at": 1, "kind": "crash_producer", "client": "tv2_producer"},
                    {"at": 2, "kind": "crash_consumer", "client": "tv2_copier"},
                ]
            },
        }
    )
    assert {u.kind for u in scenario.workload.users} == {"tv2_producer", "tv2_copier"}
    assert ("tv2_producer", "before-commit") in crash_targets("crash_producer")
    assert ("tv2_copier", "in-poll") in crash_targets("crash_consumer")


def test_locust_user_classes() -> None:
    code = (
        "import json, sys\n"
        "from txnchaos.harness.workload.users import user_classes\n"
        "from txnchaos.harness.workload.config import load_workload\n"
        "cfg = load_workload(json.loads(sys.argv[1]))\n"
        "print(sorted(c.__mro__[1].__name__ for c in user_classes(cfg)))\n"
    )
    import json

    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(WORKLOAD)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert out.strip() == "['Tv2CopierUser', 'Tv2ProducerUser']"


def test_a_misbehaving_producer_reaches_our_client(tmp_path: Path) -> None:
    """``misbehavior:`` (the buggy client of the write-before-add-partitions reproduction)
    becomes our client's ``Misbehavior``; a bad value names the field."""
    users = [
        {"kind": "tv2_producer", "topics": ["events"], "misbehavior": {"add_partitions": "never"}}
    ]
    cfg = load_workload({**WORKLOAD, "users": users})
    ctx = WorkerContext(config=cfg, run_dir=tmp_path, bootstrap="unused:1", seed=3)
    worker = Tv2ProducerWorker(cfg.users[0], ctx, "tv2-producer-0", 0)
    config = our_producer_config(worker, "t-0")
    assert config.misbehavior == Misbehavior(add_partitions="never")
    assert config.transactional_id == "t-0"
    plain = load_workload(WORKLOAD)
    worker = Tv2ProducerWorker(plain.users[0], ctx, "tv2-producer-1", 0)
    assert our_producer_config(worker, "t-1").misbehavior == Misbehavior()
    users[0]["misbehavior"] = {"add_partitions": "sometimes"}
    with pytest.raises(WorkloadConfigError, match=r"misbehavior\.add_partitions"):
        load_workload({**WORKLOAD, "users": users})


def test_late_requests_are_the_workers_not_the_clients(tmp_path: Path) -> None:
    """``misbehavior.late_request`` picks the worker's late-request transaction pairs
    (harness/workload/kinds/late_transactions.py); our client gets only its own fields; a late
    EndTxn into the next transaction needs a second partition."""
    from txnchaos.harness.workload.kinds.late_transactions import FLOWS

    wrong = {"late_request": "end_txn_into_next", "late_every": 3, "skip_epoch_bump": True}
    users = [{"kind": "tv2_producer", "topics": ["events"], "misbehavior": wrong}]
    cfg = load_workload({**WORKLOAD, "users": users})
    spec = cfg.users[0]
    assert isinstance(spec, Tv2ProducerSpec)
    assert (spec.misbehavior.late_request, spec.misbehavior.late_every) == ("end_txn_into_next", 3)
    ctx = WorkerContext(config=cfg, run_dir=tmp_path, bootstrap="unused:1", seed=3)
    worker = Tv2ProducerWorker(spec, ctx, "tv2-producer-0", 0)
    assert our_producer_config(worker, "t-0").misbehavior == Misbehavior(skip_epoch_bump=True)
    assert set(FLOWS) == {"produce_after_abort", "produce_into_next", "end_txn_into_next"}
    one = {"topics": [{"name": "events", "partitions": 1}], "users": users}
    with pytest.raises(WorkloadConfigError, match="end_txn_into_next needs 2 partitions"):
        load_workload(one)
    for bad in ({"late_request": "produce_someday"}, {"late_every": 0}):
        users[0]["misbehavior"] = bad
        with pytest.raises(WorkloadConfigError, match=r"misbehavior\.late_"):
            load_workload({**WORKLOAD, "users": users})
