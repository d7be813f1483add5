"""The Java client's user kinds (kafka-clients in a JVM per user): where a kind is looked up,
which release a user runs, and real users on our cluster: a Java producer SIGKILLed in the
middle of a transaction (its JVM dies with it; the successor's init fences and aborts the open
transaction), and a consumer and a copier recording what they read and copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from txnchaos.harness.run.scenario import parse_scenario
from txnchaos.harness.workload.config import WorkloadConfigError, load_workload
from txnchaos.harness.workload.crash import CrashableClient
from txnchaos.harness.workload.final_read import final_read, list_ends
from txnchaos.harness.workload.java_client.process import USER_PROPERTY
from txnchaos.harness.workload.java_client.versions import DEFAULT_VERSION, client_version
from txnchaos.harness.workload.kinds.java_eos_copier import JavaEOSCopierWorker
from txnchaos.harness.workload.kinds.java_read_committed_consumer import (
    JavaReadCommittedConsumerWorker,
)
from txnchaos.harness.workload.kinds.java_transactional_producer import (
    JavaTransactionalProducerSpec,
    JavaTransactionalProducerWorker,
)
from txnchaos.harness.workload.kinds.registry import crash_targets, user_kind
from txnchaos.harness.workload.topics import ensure_topics
from txnchaos.harness.workload.workers import WorkerContext
from txnchaos.rundir.schema import decode_value

from .helpers import compacted, jsonl_lines

ROOT = Path(__file__).resolve().parents[3]

WORKLOAD: dict[str, Any] = {
    "topics": [{"name": "events", "partitions": 2}, {"name": "copies", "partitions": 2}],
    "users": [
        {"kind": "java_transactional_producer", "topics": ["events"]},
        {"kind": "java_read_committed_consumer", "topics": ["events"]},
        {"kind": "java_eos_copier", "input_topics": ["events"], "output_topic": "copies"},
    ],
}


def test_kinds_specs_and_crash_targets() -> None:
    cfg = load_workload(WORKLOAD)
    producer, _consumer, _copier = cfg.users
    assert isinstance(producer, JavaTransactionalProducerSpec)
    assert producer.kafka_clients_version is None and producer.java_config == {}
    assert user_kind("java_read_committed_consumer").worker is JavaReadCommittedConsumerWorker
    assert user_kind("java_eos_copier").worker is JavaEOSCopierWorker
    assert [cfg.process_prefix(u) for u in cfg.users] == [
        "java-producer",
        "java-consumer",
        "java-copier",
    ]
    assert ("java_transactional_producer", "before-commit") in crash_targets("crash_producer")
    assert ("java_read_committed_consumer", "in-poll") in crash_targets("crash_consumer")
    assert ("java_eos_copier", "in-poll") in crash_targets("crash_consumer")
    scenario = parse_scenario(
        {
            "name": "x",
            "workload": WORKLOAD,
            "nemesis": {"actions": [{"at": 1, "kind": "crash_producer"}]},
        }
    )
    assert scenario.workload.users[0].kind == "java_transactional_producer"
    bad = {"kind": "java_transactional_producer", "topics": ["events"]}
    for field, value in (("kafka_clients_version", "latest"), ("java_confg", {})):
        with pytest.raises(WorkloadConfigError, match=field):
            load_workload({**WORKLOAD, "users": [{**bad, field: value}]})


def test_the_release_a_user_runs(tmp_path: Path) -> None:
    """Its own choice; else the Apache Kafka cluster's release (run.json); else the default."""
    assert client_version(None, tmp_path) == DEFAULT_VERSION  # no run.json yet
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"cluster": {"flavour": "txnchaos", "version": "0.1.0"}}))
    assert client_version(None, tmp_path) == DEFAULT_VERSION
    run_json.write_text(json.dumps({"cluster": {"flavour": "apache-kafka", "version": "4.3.1"}}))
    assert client_version(None, tmp_path) == "4.3.1"
    assert client_version("4.0.0", tmp_path) == "4.0.0"


def jvms_of(user: str) -> list[int]:
    """Pids of the JVMs that run ``user``'s clients (their command line names it) and that this
    test process started (they inherit its pytest-xdist worker name): another worker's test,
    or a run beside the suite, may have a user of the same name."""
    mark = f"-D{USER_PROPERTY}={user}".encode()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0") if worker else []
        except OSError:
            continue
        if mark in args and (not worker or f"PYTEST_XDIST_WORKER={worker}".encode() in environ):
            pids.append(int(entry.name))
    return pids


def wait_until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_java_producer_killed_mid_transaction_is_fenced_by_its_successor(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    topic = f"java-crash-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": topic, "partitions": 2}],
            "users": [
                {
                    "kind": "java_transactional_producer",
                    "topics": [topic],
                    "records_per_txn": 4,
                    "partitions_per_txn": 2,
                    "abort_probability": 0,
                    # long: only the successor's fencing can end the open transaction in time
                    "transaction_timeout_ms": 600_000,
                    "transactional_id": f"java-{uniq}-{{index}}",
                }
            ],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    run = tmp_path / "run"
    c = CrashableClient(cfg, 0, run, wl_bootstrap, hold="before-commit", hold_after=2)
    c.start(180)
    open_txn = int(c.wait_hold(180).split("txn=")[1])
    assert len(jvms_of(c.process)) == 1
    assert any(e.lso < e.high_watermark for e in list_ends(wl_bootstrap, {topic: 2}))
    c.kill()
    # the JVM halts when its user's process dies (its stdin closes), sending nothing more
    wait_until(lambda: not jvms_of(c.process), 30, "the killed user's JVM outlived it")
    assert any(e.lso < e.high_watermark for e in list_ends(wl_bootstrap, {topic: 2}))

    lines = [r for r in jsonl_lines(run) if r["process"] == c.process]
    assert lines[-1]["type"] == "stop" and lines[-1]["outcome"] == "info"
    assert "commit" not in [r["type"] for r in lines if r.get("txn") == open_txn]
    commits = [r for r in lines if r["type"] == "commit" and r.get("outcome") == "ok"]
    assert [r["txn"] for r in commits] == [0, 1]
    assert all(r["producer_id"] is not None and r["producer_epoch"] is not None for r in commits)

    # the successor (same transactional.id) fences it: its init aborts the open transaction,
    # then its own transactions commit
    ctx = WorkerContext(config=cfg, run_dir=run, bootstrap=wl_bootstrap, seed=5)
    s = JavaTransactionalProducerWorker(cfg.users[0], ctx, f"{c.process}-successor", c.index)
    assert s.transactional_id == f"java-{uniq}-{c.index}"
    s.start()
    try:
        s.step()
        s.step()
    finally:
        s.stop()
    assert not jvms_of(s.process)
    assert all(e.lso == e.high_watermark for e in list_ends(wl_bootstrap, {topic: 2}))
    result = final_read(wl_bootstrap, {topic: 2}, run, timeout_s=60)
    assert result.complete, result.to_dict()
    rows = compacted(run)
    read = {decode_value(r["value"]) for r in rows if r["type"] == "final_read" and r["value"]}
    mine = {(txn, i) for writer, txn, i in read if writer == c.process}
    assert mine == {(t, i) for t in (0, 1) for i in range(4)}, "only its committed txns"
    inits = [r for r in rows if r["process"] == s.process and r["type"] == "init"]
    assert inits and inits[0]["outcome"] == "ok"
    first = next(r for r in rows if r["process"] == c.process and r["type"] == "init")
    assert inits[0]["producer_id"] == first["producer_id"]
    assert inits[0]["producer_epoch"] > commits[-1]["producer_epoch"]


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_java_consumer_and_copier_record_what_they_read_and_copy(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    """A Java producer's committed transactions are read by a Java consumer and copied once
    by a Java copier, every op recorded in the shapes the checkers read."""
    src, dst = f"java-in-{uniq}", f"java-out-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": src, "partitions": 2}, {"name": dst, "partitions": 2}],
            "users": [
                {
                    "kind": "java_transactional_producer",
                    "topics": [src],
                    "records_per_txn": 5,
                    "abort_probability": 0,
                },
                {"kind": "java_read_committed_consumer", "topics": [src], "group_id": uniq},
                {
                    "kind": "java_eos_copier",
                    "input_topics": [src],
                    "output_topic": dst,
                    "group_id": f"{uniq}-copy",
                    "abort_probability": 0,
                },
            ],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    run = tmp_path / "run"
    ctx = WorkerContext(config=cfg, run_dir=run, bootstrap=wl_bootstrap, seed=3)
    producer = JavaTransactionalProducerWorker(cfg.users[0], ctx, "java-producer-0", 0)
    consumer = JavaReadCommittedConsumerWorker(cfg.users[1], ctx, "java-consumer-0", 0)
    copier = JavaEOSCopierWorker(cfg.users[2], ctx, "java-copier-0", 0)
    workers = (producer, consumer, copier)
    t0 = time.monotonic()
    for w in workers:
        w.start()
    jvm_start_s = (time.monotonic() - t0) / 3
    try:
        for _ in range(4):
            producer.step()
        deadline = time.monotonic() + 120
        copied = read = 0
        while copied < 20 or read < 20:
            assert time.monotonic() < deadline, f"copied {copied}, read {read} of 20"
            consumer.step()
            copier.step()
            rows = [json.loads(x) for x in (run / "history" / "java-copier-0.jsonl").open()]
            copied = sum(
                len(r.get("items") or [])
                for r in rows
                if r["type"] == "send" and r.get("outcome") == "ok"
            )
            rows = [json.loads(x) for x in (run / "history" / "java-consumer-0.jsonl").open()]
            read = sum(len(r.get("items") or []) for r in rows if r["type"] == "poll")
    finally:
        for w in workers:
            w.stop()
    print(f"JVM start, mean of three users: {jvm_start_s:.2f}s")
    assert all(not jvms_of(w.process) for w in workers)

    rows = compacted(run)
    polled = [r for r in rows if r["process"] == "java-consumer-0" and r["type"] == "poll"]
    assert {decode_value(r["value"])[0] for r in polled if r["value"]} == {"java-producer-0"}
    assert all(r["isolation"] == "read_committed" for r in polled)
    assert any(r["type"] == "assign" for r in rows if r["process"] == "java-consumer-0")
    assert any(r["type"] == "commit_offsets" and r["outcome"] == "ok" for r in rows)
    copies = [r for r in rows if r["process"] == "java-copier-0" and r["type"] == "send"]
    assert len({r["source"] for r in copies}) == len(copies) >= 20, "each input copied once"
    offsets = [r for r in rows if r["type"] == "send_offsets" and r["outcome"] == "ok"]
    assert offsets and all(r["group_id"] == f"{uniq}-copy" for r in offsets)
    assert {(r["type"], r["outcome"]) for r in rows if r["process"] == "java-copier-0"} >= {
        ("init", "ok"),
        ("begin", "ok"),
        ("commit", "ok"),
    }


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize("version", ["4.0.0", "4.4.0"])
def test_the_oldest_and_newest_releases_commit_on_our_cluster(
    wl_bootstrap: str, tmp_path: Path, uniq: str, version: str
) -> None:
    """The program is compiled against 4.0.0 and reaches internals by reflection (4.4 moved
    some of them): both ends of the 4.x line start, commit under transaction.version 2 (the
    epoch grows by one per commit) and acknowledge every record."""
    from txnchaos.harness.workload.java_client.process import JavaProcess

    topic = f"java-ver-{uniq}"
    ensure_topics(wl_bootstrap, load_workload({"topics": [{"name": topic}]}).topics)
    acks: list[dict[str, Any]] = []
    java = JavaProcess(f"v{version}", version, tmp_path / "jvm.log")
    java.on_ack = acks.append
    assert java.start(120).version == version
    try:
        java.request("producer", f"bootstrap.servers={wl_bootstrap}", f"transactional.id={uniq}")
        producer_id, epoch = java.request("init", False)["ids"]
        for n in range(1, 4):
            java.request("begin")
            for i in range(4):
                java.post("send", topic, i % 3, None, f"{uniq}|{n}|{i}", 0)
            assert java.request("commit")["ids"] == [producer_id, epoch + n]
        java.request("close_producer", 1000)
    finally:
        java.stop()
    assert len(acks) == 12 and all(a.get("offset", -1) >= 0 for a in acks), acks


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_user_waiting_on_its_jvm_does_not_hold_up_the_others(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    """Under locust (gevent), a consumer's 3-second polls of an empty topic run while a
    producer of the same process commits: some commit starts in the first half of a poll and
    ends inside it. A user
    that blocked the process while it waited for its JVM would make that impossible."""
    busy, idle = f"java-busy-{uniq}", f"java-idle-{uniq}"
    config = {
        "topics": [{"name": busy, "partitions": 2}, {"name": idle, "partitions": 1}],
        "users": [
            {
                "kind": "java_transactional_producer",
                "topics": [busy],
                "records_per_txn": 2,
                "partitions_per_txn": 1,
                "abort_probability": 0,
            },
            {
                "kind": "java_read_committed_consumer",
                "topics": [idle],
                "group_id": uniq,
                "poll_timeout_ms": 3000,
            },
        ],
    }
    ensure_topics(wl_bootstrap, load_workload(config).topics)
    run = tmp_path / "run"
    spec = tmp_path / "workload.json"
    spec.write_text(json.dumps(config))
    # the users run until the consumer made 3 polls after the producer's first commit,
    # however long the JVMs take to start on a loaded machine
    probe = [sys.executable, "-m", "tests.harness.workload.java_gevent_probe"]
    proc = subprocess.run(
        [*probe, str(spec), wl_bootstrap, str(run)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = compacted(run)
    polls = [
        (r["invoke_ns"], r["complete_ns"])
        for r in rows
        if r["process"].startswith("java-consumer") and r["type"] == "poll"
    ]
    long_polls = [(a, b) for a, b in polls if b - a >= 2_000_000_000]
    commits = [
        (r["invoke_ns"], r["complete_ns"])
        for r in rows
        if r["process"].startswith("java-producer")
        and r["type"] == "commit"
        and r["outcome"] == "ok"
    ]
    assert long_polls and commits, (len(polls), len(commits))
    # a commit begun in the first half of a poll and ended before it did
    inside = [c for c in commits if any(a < c[0] < (a + b) / 2 and c[1] < b for a, b in long_polls)]
    assert inside, "no commit ran while the consumer waited in a poll"


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_java_copier_killed_mid_transaction_then_successor_copies_exactly_once(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    """A Java copier killed with its copies sent and its offsets in the transaction (commit
    never called): the transaction times out, the successor's group takes the partitions
    over from the committed offsets, and every input is copied exactly once."""
    from confluent_kafka import Consumer, TopicPartition

    from txnchaos.harness.workload.kinds.idempotent_producer import IdempotentProducerWorker

    src, dst, group = f"jcp-in-{uniq}", f"jcp-out-{uniq}", f"jcp-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": src, "partitions": 2}, {"name": dst, "partitions": 2}],
            "users": [
                {"kind": "idempotent_producer", "topics": [src], "records_per_batch": 30},
                {
                    "kind": "java_eos_copier",
                    "input_topics": [src],
                    "output_topic": dst,
                    "group_id": group,
                    "max_records_per_txn": 10,
                    "abort_probability": 0,
                    "transaction_timeout_ms": 3000,
                    # the dead member holds its partitions until its session times out
                    "java_config": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
                },
            ],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    run = tmp_path / "run"
    w = IdempotentProducerWorker(
        cfg.users[0], WorkerContext(cfg, run, wl_bootstrap), "idem-producer-0", 0
    )
    w.start()
    w.step()
    w.stop()

    c = CrashableClient(cfg, 1, run, wl_bootstrap, hold="before-commit")
    c.start(180)
    c.wait_hold(180)
    c.kill()
    wait_until(lambda: not jvms_of(c.process), 30, "the killed copier's JVM outlived it")
    s = c.successor()
    s.start(180)
    committed = Consumer({"bootstrap.servers": wl_bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 120
        while True:
            parts = committed.committed([TopicPartition(src, 0), TopicPartition(src, 1)], 10)
            done = sum(max(tp.offset, 0) for tp in parts)
            if done >= 30:
                break
            assert time.monotonic() < deadline, f"successor copied only {done} of 30"
            time.sleep(0.3)
    finally:
        committed.close()
    assert s.stop() == 0

    result = final_read(wl_bootstrap, {dst: 2}, run, timeout_s=60)
    assert result.complete, result.to_dict()
    rows = compacted(run)
    sends = {r["value"]: r for r in rows if r["type"] == "send" and r["txn"] is not None}
    copies = [r["value"] for r in rows if r["type"] == "final_read" and r["value"]]
    sources = [sends[v]["source"] for v in copies]
    assert sorted(sources) == sorted(f"idem-producer-0|-|{i}" for i in range(30))
    assert {decode_value(v)[0] for v in copies} == {s.process}, "the killed copy is invisible"
    held = [r for r in rows if r["process"] == c.process and r["type"] == "send_offsets"]
    assert held and held[-1]["outcome"] == "ok" and held[-1]["group_id"] == group


def test_a_release_that_cannot_be_had_stops_the_workload_before_any_user(tmp_path: Path) -> None:
    """The runner fetches every Java user's release before its users start: one that cannot
    be had (here: not cached, fetching off) is one line and exit code 2, no user started."""
    config = {
        "topics": [{"name": "events", "partitions": 2}],
        "users": [
            {
                "kind": "java_transactional_producer",
                "topics": ["events"],
                "kafka_clients_version": "4.0.99",
            }
        ],
    }
    spec = tmp_path / "workload.json"
    spec.write_text(json.dumps(config))
    run = tmp_path / "run"
    runner = [sys.executable, "-m", "txnchaos.harness.workload.runner", "--config", str(spec)]
    proc = subprocess.run(
        [*runner, "--bootstrap", "127.0.0.1:9", "--run-dir", str(run), "--duration", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TXNCHAOS_MAVEN_OFFLINE": "1"},
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("workload: java_transactional_producer: kafka-clients 4.0.99 ")
    assert "fetching is off" in line
    assert not (run / "history").exists()
