"""Client crash faults: workload users in their own processes, SIGKILLed at chosen points."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from txnchaos.harness.workload.config import load_workload
from txnchaos.harness.workload.crash import CrashableClient
from txnchaos.harness.workload.final_read import final_read, list_ends
from txnchaos.harness.workload.kinds.idempotent_producer import IdempotentProducerWorker
from txnchaos.harness.workload.topics import ensure_topics
from txnchaos.harness.workload.workers import WorkerContext
from txnchaos.rundir.schema import decode_value

from .helpers import compacted, jsonl_lines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def last_lines(run: Path, process: str) -> list[dict[str, Any]]:
    return [r for r in jsonl_lines(run) if r["process"] == process]


def test_producer_killed_before_acks_leaves_unknown_sends(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    topic = f"crash-idem-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": topic, "partitions": 2}],
            "users": [{"kind": "idempotent_producer", "topics": [topic], "records_per_batch": 5}],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    run = tmp_path / "run"
    c = CrashableClient(cfg, 0, run, wl_bootstrap, hold="before-ack", hold_after=2)
    c.start()
    c.wait_hold()
    c.kill()
    assert not c.alive
    lines = last_lines(run, c.process)
    assert lines[-1]["type"] == "stop" and lines[-1]["outcome"] == "info"
    tail = lines[-6:-1]
    assert [r["type"] for r in tail] == ["send"] * 5
    assert all(r.get("outcome") is None for r in tail), "the last batch was never acked"
    rows = [r for r in compacted(run) if r["process"] == c.process]
    sends = [r for r in rows if r["type"] == "send"]
    assert [r["outcome"] for r in sends].count("info") == 5
    assert all(r["complete_ns"] is None for r in sends if r["outcome"] == "info")
    assert [r["outcome"] for r in sends].count("ok") == 10
    ops = sorted(r["op_id"] for r in rows)
    assert ops == sorted(set(ops)), "op ids must stay unique across the crash record"

    # a successor takes a new name; its history starts afresh
    s = c.successor()
    assert s.process != c.process and s.index == c.index
    s.start()
    assert s.stop() == 0
    assert last_lines(run, s.process)[-1]["type"] == "stop"


def test_transactional_producer_killed_mid_transaction(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    topic = f"crash-txn-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": topic, "partitions": 2}],
            "users": [
                {
                    "kind": "transactional_producer",
                    "topics": [topic],
                    "records_per_txn": 4,
                    "partitions_per_txn": 2,
                    "abort_probability": 0,
                    "transaction_timeout_ms": 3000,
                }
            ],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    run = tmp_path / "run"
    c = CrashableClient(cfg, 0, run, wl_bootstrap, hold="before-commit", hold_after=2)
    c.start()
    hold = c.wait_hold()
    open_txn = int(hold.split("txn=")[1])
    ends = list_ends(wl_bootstrap, {topic: 2})
    assert any(e.lso < e.high_watermark for e in ends), "the held transaction must be open"
    c.kill()

    lines = last_lines(run, c.process)
    assert lines[-1]["type"] == "stop" and lines[-1]["outcome"] == "info"
    types = [r["type"] for r in lines]
    assert "commit" not in [r["type"] for r in lines if r.get("txn") == open_txn]
    assert types.count("begin") >= 3

    # nobody aborts it but the coordinator, after transaction.timeout.ms
    deadline = time.monotonic() + 90
    while any(e.lso < e.high_watermark for e in list_ends(wl_bootstrap, {topic: 2})):
        assert time.monotonic() < deadline, "the coordinator never aborted the transaction"
        time.sleep(0.5)
    result = final_read(wl_bootstrap, {topic: 2}, run, timeout_s=60)
    assert result.complete, result.to_dict()
    rows = compacted(run)
    read = [decode_value(r["value"]) for r in rows if r["type"] == "final_read" and r["value"]]
    assert {txn for _, txn, _ in read} == {0, 1}, "committed txns visible, the killed one not"
    assert len(read) == 8


def test_consumer_killed_mid_poll(wl_bootstrap: str, tmp_path: Path, uniq: str) -> None:
    topic = f"crash-poll-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": topic, "partitions": 2}],
            "users": [
                {"kind": "idempotent_producer", "topics": [topic], "records_per_batch": 20},
                {"kind": "read_committed_consumer", "topics": [topic], "mode": "assign"},
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
    c = CrashableClient(cfg, 1, run, wl_bootstrap, hold="in-poll", hold_after=3)
    c.start()
    c.wait_hold()
    c.kill()
    lines = last_lines(run, c.process)
    assert lines[-1]["type"] == "stop" and lines[-1]["outcome"] == "info"
    polled = [it for r in lines if r["type"] == "poll" for it in r.get("items", [])]
    assert len(polled) == 20
    rows = compacted(run)
    assert {r["type"] for r in rows if r["process"] == c.process} >= {"start", "assign", "poll"}


def test_copier_killed_mid_transaction_then_successor_copies_exactly_once(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    src, dst, group = f"cp-in-{uniq}", f"cp-out-{uniq}", f"cp-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": src, "partitions": 2}, {"name": dst, "partitions": 2}],
            "users": [
                {"kind": "idempotent_producer", "topics": [src], "records_per_batch": 30},
                {
                    "kind": "eos_copier",
                    "input_topics": [src],
                    "output_topic": dst,
                    "group_id": group,
                    "max_records_per_txn": 10,
                    "abort_probability": 0,
                    "transaction_timeout_ms": 3000,
                    # the dead member holds its partitions until its session times out
                    "client_config": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
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
    c.start()
    c.wait_hold()
    c.kill()
    s = c.successor()
    s.start()
    committed = Consumer({"bootstrap.servers": wl_bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 90
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
    killed = {decode_value(v)[0] for v in copies}
    assert killed == {s.process}, "the killed copier's open transaction must not be visible"


def test_zombie_producer_woken_after_a_new_instance_is_refused(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    """The ``zombie`` hold: paused mid-transaction while its successor (same transactional id)
    initialises and commits, then woken: its commit is refused and none of its records of
    that transaction are visible; the successor's committed one is."""
    import signal

    topic = f"zombie-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": topic, "partitions": 2}],
            "users": [
                {
                    "kind": "transactional_producer",
                    "topics": [topic],
                    "records_per_txn": 4,
                    "partitions_per_txn": 2,
                    "abort_probability": 0,
                    "transaction_timeout_ms": 3000,
                    "transactional_id": f"zombie-{uniq}-{{index}}",
                }
            ],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    run = tmp_path / "run"
    old = CrashableClient(cfg, 0, run, wl_bootstrap, hold="zombie", hold_after=1)
    old.start()
    held = int(old.wait_hold().split("txn=")[1])
    assert old.child.proc is not None
    old.child.proc.send_signal(signal.SIGSTOP)
    new = old.successor(hold="before-commit", hold_after=1)
    new.start()
    new.wait_hold()
    old.child.proc.send_signal(signal.SIGCONT)
    old.child.proc.send_signal(signal.SIGUSR1)
    resumed = old.wait_line("RESUMED", 60)
    assert f"txn={held}" in resumed and "outcome=ok" not in resumed, resumed
    new.stop(10)
    old.stop(10)

    commits = [r for r in last_lines(run, old.process) if r["type"] == "commit"]
    assert commits[-1]["txn"] == held and commits[-1]["outcome"] != "ok"
    deadline = time.monotonic() + 90  # the successor's held transaction times out
    while any(e.lso < e.high_watermark for e in list_ends(wl_bootstrap, {topic: 2})):
        assert time.monotonic() < deadline, "a transaction stayed open"
        time.sleep(0.5)
    result = final_read(wl_bootstrap, {topic: 2}, run, timeout_s=60)
    assert result.complete, result.to_dict()
    rows = compacted(run)
    read = {decode_value(r["value"])[:2] for r in rows if r["type"] == "final_read" and r["value"]}
    assert (old.process, held) not in read
    assert (old.process, 0) in read and (new.process, 0) in read
