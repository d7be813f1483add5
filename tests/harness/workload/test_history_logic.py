"""Unit tests of what the transactional and idempotent workers record, with a scripted producer.

These pin the outcome rules of clients.py (ok / fail / info per KafkaError class) without a
cluster; the same workers run against the real cluster in test_workload_cluster.py.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from txnchaos.harness.workload.clients import GeventExecutor, send_outcome
from txnchaos.harness.workload.config import load_workload
from txnchaos.harness.workload.kinds.idempotent_producer import IdempotentProducerWorker
from txnchaos.harness.workload.kinds.transactional_producer import TransactionalProducerWorker
from txnchaos.harness.workload.workers import NameAllocator, WorkerContext
from txnchaos.rundir.schema import decode_value

from .fakes import FakeProducer, kerr
from .helpers import compacted, jsonl_lines


def make_worker(tmp_path: Path, **spec: Any) -> TransactionalProducerWorker:
    cfg = load_workload(
        {
            "topics": [{"name": "a", "partitions": 4}],
            "users": [{"kind": "transactional_producer", "topics": ["a"], **spec}],
            "statistics_interval_ms": 100,
        }
    )
    ctx = WorkerContext(
        config=cfg, run_dir=tmp_path, bootstrap="unused:1", seed=3, producer_factory=FakeProducer
    )
    w = TransactionalProducerWorker(cfg.users[0], ctx, "txn-producer-0", 0)
    w.start()
    return w


def ops(tmp_path: Path) -> list[dict[str, Any]]:
    """Completed ops (one row per op; items kept nested) in op_id order."""
    done = [r for r in jsonl_lines(tmp_path) if r.get("outcome")]
    return sorted(done, key=lambda r: r["op_id"])


def kinds(tmp_path: Path) -> list[tuple[str, str]]:
    return [(r["type"], r["outcome"]) for r in ops(tmp_path)]


def fake(w: TransactionalProducerWorker) -> FakeProducer:
    assert w.client is not None
    return w.client.producer


def test_committed_transaction_history(tmp_path: Path) -> None:
    w = make_worker(tmp_path, records_per_txn=6, partitions_per_txn=3, abort_probability=0)
    w.step()
    w.step()
    w.stop()
    k = kinds(tmp_path)
    assert k[:3] == [("start", "ok"), ("init", "ok"), ("begin", "ok")]
    assert Counter(k)[("send", "ok")] == 12 and Counter(k)[("commit", "ok")] == 2
    assert k[-1] == ("stop", "ok")
    sends = [r for r in ops(tmp_path) if r["type"] == "send"]
    for r in sends:
        (item,) = r["items"]
        assert item["offset"] >= 0
        writer, txn, _ = decode_value(item["value"])
        assert (writer, txn) == ("txn-producer-0", r["txn"])
        assert r["transactional_id"] == "txn-producer-0"
    first = [r["items"][0] for r in sends if r["txn"] == 0]
    assert [decode_value(i["value"])[2] for i in first] == list(range(6))
    assert len({i["partition"] for i in first}) == 3
    assert [r["txn"] for r in ops(tmp_path) if r["type"] == "commit"] == [0, 1]
    rows = compacted(tmp_path)
    assert {r["outcome"] for r in rows} == {"ok"}


def test_retriable_commit_settled_by_a_retry_is_one_ok_op(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0, commit_retries=2)
    w.ensure_init()
    fake(w).script["commit_transaction"] = [kerr(KafkaError._TIMED_OUT, retriable=True), None]
    w.step()
    commits = [r for r in jsonl_lines(tmp_path) if r["type"] == "commit"]
    assert [c.get("outcome") for c in commits] == [None, "ok"]
    assert fake(w).calls.count("commit_transaction") == 2


def test_commit_timeouts_exhausting_retries_are_info_and_reset_the_producer(
    tmp_path: Path,
) -> None:
    w = make_worker(tmp_path, abort_probability=0, commit_retries=1)
    w.ensure_init()
    old = fake(w)
    old.script["commit_transaction"] = [kerr(KafkaError._TIMED_OUT, retriable=True)] * 2
    w.step()
    (commit,) = [r for r in ops(tmp_path) if r["type"] == "commit"]
    assert commit["outcome"] == "info" and "_TIMED_OUT" in commit["error"]
    assert fake(w) is not old and not w.client.initialized  # type: ignore[union-attr]
    w.step()  # the new producer initialises (fencing the old epoch) and goes on
    assert kinds(tmp_path)[-1] == ("commit", "ok")
    assert [r["txn"] for r in ops(tmp_path) if r["type"] == "begin"] == [0, 1]
    assert Counter(kinds(tmp_path))[("init", "ok")] == 2


def test_abortable_commit_error_is_fail_then_abort(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0)
    w.ensure_init()
    fake(w).script["commit_transaction"] = [kerr(KafkaError.INVALID_TXN_STATE, abortable=True)]
    w.step()
    assert kinds(tmp_path)[-2:] == [("commit", "fail"), ("abort", "ok")]


def test_fatal_commit_error_is_info(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0)
    w.ensure_init()
    fake(w).script["commit_transaction"] = [kerr(KafkaError._FENCED, fatal=True)]
    w.step()
    assert kinds(tmp_path)[-1] == ("commit", "info")
    assert not w.client.initialized  # type: ignore[union-attr]


def test_abort_with_and_without_flush(tmp_path: Path) -> None:
    w = make_worker(
        tmp_path, abort_probability=1, flush_before_abort_probability=1, records_per_txn=3
    )
    w.step()
    assert kinds(tmp_path)[-4:] == [("send", "ok")] * 3 + [("abort", "ok")]
    w.spec = w.spec.model_copy(update={"flush_before_abort_probability": 0.0})
    w.step()
    # abort purges what was never sent: those sends definitely did not happen
    assert kinds(tmp_path)[-4:] == [("send", "fail")] * 3 + [("abort", "ok")]
    assert "_PURGE_QUEUE" in ops(tmp_path)[-2]["error"]


def test_abortable_delivery_error_aborts_instead_of_committing(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0, records_per_txn=2)
    w.ensure_init()
    fake(w).delivery_error = KafkaError(KafkaError.INVALID_TXN_STATE, "x", txn_requires_abort=True)
    w.step()
    assert kinds(tmp_path)[-3:] == [("send", "fail"), ("send", "fail"), ("abort", "ok")]
    assert "commit" not in [t for t, _ in kinds(tmp_path)]


def test_retriable_abort_is_retried(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=1, commit_retries=3)
    w.ensure_init()
    fake(w).script["abort_transaction"] = [kerr(KafkaError._TIMED_OUT, retriable=True)] * 2
    w.step()
    assert kinds(tmp_path)[-1] == ("abort", "ok")
    assert fake(w).calls.count("abort_transaction") == 3


def test_init_failure_is_recorded_and_retried(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0)
    fake(w).script["init_transactions"] = [
        kerr(KafkaError.COORDINATOR_NOT_AVAILABLE, retriable=True)
    ]
    w.step()
    w.step()
    k = kinds(tmp_path)
    assert k[1] == ("init", "info") and ("init", "ok") in k and k[-1] == ("commit", "ok")


def test_producer_id_and_epoch_come_from_fresh_statistics(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0)
    fake(w).stats = {"eos": {"producer_id": 42, "producer_epoch": 3, "txn_state": "Ready"}}
    w.ensure_init()
    time.sleep(0.002)
    w.client.poll(0)  # type: ignore[union-attr]
    w.step()
    (commit,) = [r for r in ops(tmp_path) if r["type"] == "commit"]
    assert (commit["producer_id"], commit["producer_epoch"]) == (42, 3)
    (init,) = [r for r in ops(tmp_path) if r["type"] == "init"]
    assert "producer_id" not in init  # the snapshot predates nothing after init: not trusted


def test_clean_stop_leaves_an_open_transaction_open(tmp_path: Path) -> None:
    w = make_worker(tmp_path, abort_probability=0)
    txn = w.begin()
    w.send_records(txn)
    producer = fake(w)
    w.stop()
    assert "abort_transaction" not in producer.calls and "close" not in producer.calls
    w2 = make_worker(tmp_path / "b", abort_probability=0)
    txn = w2.begin()
    w2.send_records(txn)
    producer = fake(w2)
    w2.stop(abort_open=True)
    assert "abort_transaction" in producer.calls
    assert kinds(tmp_path / "b")[-2:] == [("abort", "ok"), ("stop", "ok")]


def test_idempotent_values_have_no_txn(tmp_path: Path) -> None:
    cfg = load_workload(
        {
            "topics": [{"name": "a", "partitions": 2}],
            "users": [{"kind": "idempotent_producer", "topics": ["a"], "records_per_batch": 4}],
        }
    )
    ctx = WorkerContext(cfg, tmp_path, "unused:1", seed=1, producer_factory=FakeProducer)
    w = IdempotentProducerWorker(cfg.users[0], ctx, "idem-producer-0", 0)
    w.start()
    w.step()
    w.step()
    w.stop()
    sends = [r for r in ops(tmp_path) if r["type"] == "send"]
    assert [decode_value(r["items"][0]["value"]) for r in sends] == [
        ("idem-producer-0", None, i) for i in range(8)
    ]
    assert all("txn" not in r for r in sends)


def test_send_outcomes() -> None:
    assert send_outcome(KafkaError(KafkaError._PURGE_QUEUE)) == "fail"
    assert send_outcome(KafkaError(KafkaError._PURGE_INFLIGHT)) == "info"
    assert send_outcome(KafkaError(KafkaError._MSG_TIMED_OUT)) == "info"
    assert send_outcome(KafkaError(KafkaError.INVALID_TXN_STATE)) == "fail"
    assert send_outcome(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS, retriable=True)) == "info"


def test_name_allocator_skips_existing_histories(tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "consumer-0.jsonl").write_text("")
    names = NameAllocator(tmp_path)
    assert names.allocate("consumer") == ("consumer-1", 1)
    assert names.allocate("consumer") == ("consumer-2", 2)
    names.tag = "w3"
    assert names.allocate("copier") == ("copier-w3-0", 0)


def test_gevent_executor_does_not_block_other_greenlets() -> None:
    import gevent

    ex = GeventExecutor(min_threads=4)
    ticks = []

    def ticker() -> None:
        for _ in range(20):
            ticks.append(1)
            gevent.sleep(0.01)

    t = gevent.spawn(ticker)
    blocked = gevent.spawn(ex.run, time.sleep, 0.3)  # a real blocking call
    gevent.joinall([t, blocked], timeout=10)
    assert len(ticks) == 20 and blocked.successful()


@pytest.mark.parametrize("retries", [0, 3])
def test_history_lines_compact(tmp_path: Path, retries: int) -> None:
    w = make_worker(tmp_path, abort_probability=0.5, commit_retries=retries)
    for _ in range(5):
        w.step()
    w.stop()
    rows = compacted(tmp_path)
    assert rows and all(r["process"] == "txn-producer-0" for r in rows)
