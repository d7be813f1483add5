"""The watchdog on librdkafka's blocking transactional calls (librdkafka#5456).

A real copier (EOSCopierWorker, real confluent-kafka clients) against librdkafka's own mock
cluster: its group coordinator is taken down mid-transaction, so send_offsets_to_transaction
never returns (its timeout is never checked while the coordinator request cannot be sent).
The watchdog gives up on it, the op is completed ``info`` naming the hang, the producer is
abandoned without close()/flush(), a hang record is written (the verdict's ``client_hang``
finding), and the copier goes on with a new producer and commits once the coordinator is
back. Both executors: gevent's pool (locust's users) and a thread of its own (the crashable
subprocess)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Producer

from txnchaos.analysis.findings import finding_line, read_findings
from txnchaos.harness.workload.clients import (
    HANG_GRACE_S,
    CallStillRunning,
    DirectExecutor,
    Executor,
    GeventExecutor,
    ProducerClient,
    abandoned_producers,
)
from txnchaos.harness.workload.config import load_workload
from txnchaos.harness.workload.crash import CrashableClient
from txnchaos.harness.workload.kinds.eos_copier import EOSCopierWorker
from txnchaos.harness.workload.recording import CallHung, ProducerReset
from txnchaos.harness.workload.workers import WorkerContext
from txnchaos.rundir.client_hangs import read_hangs
from txnchaos.rundir.writer import HistoryWriter

from .fakes import FakeProducer
from .helpers import ops_so_far
from .librdkafka_mock import MockCluster

TXN_COORDINATOR, GROUP_COORDINATOR, LEADER = 1, 2, 3
OP_TIMEOUT_S = 2.0
GRACE_S = 1.0
#: steps (polls of 0.5 s, transactions) a phase may take at most
MAX_STEPS = 200


def _executor(name: str) -> Executor:
    return GeventExecutor(min_threads=4) if name == "gevent" else DirectExecutor()


def _produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        p.produce(topic, f"in-{i}".encode(), partition=0)
    assert p.flush(30) == 0


def _steps_until(w: EOSCopierWorker, done: Callable[[], bool]) -> None:
    for _ in range(MAX_STEPS):
        if done():
            return
        w.step()
    assert done()


def eventually(cond: Callable[[], bool], limit_s: float = 120.0) -> None:
    """Wait for a subprocess's progress (a generous limit: only a hang reaches it)."""
    deadline = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.1)


def _ops(run_dir: Path, type_: str, outcome: str) -> list[dict[str, Any]]:
    return [
        r
        for r in ops_so_far(run_dir)
        if r["type"] == type_ and r.get("outcome") == outcome and r["process"] == "copier-0"
    ]


def _copier_on_mock() -> tuple[MockCluster, dict[str, Any]]:
    """librdkafka's mock cluster with the copier's topics and its transaction and group
    coordinators on brokers of their own, and the workload of one copier over it."""
    mock = MockCluster(3)
    mock.topic("in", 1, LEADER)
    mock.topic("out", 1, LEADER)
    mock.coordinator("transaction", "copier-tx", TXN_COORDINATOR)
    mock.coordinator("group", "copiers", GROUP_COORDINATOR)
    config = {
        "topics": [{"name": "in", "partitions": 1}, {"name": "out", "partitions": 1}],
        "users": [
            {
                "kind": "eos_copier",
                "input_topics": ["in"],
                "output_topic": "out",
                "group_id": "copiers",
                "transactional_id": "copier-tx",
                "max_records_per_txn": 5,
                "abort_probability": 0,
                "op_timeout_s": OP_TIMEOUT_S,
            }
        ],
    }
    return mock, config


@pytest.mark.parametrize("executor", ["gevent", "direct"])
def test_a_send_offsets_that_never_returns_is_given_up_and_the_copier_goes_on(
    executor: str, tmp_path: Path
) -> None:
    mock, config = _copier_on_mock()
    cfg = load_workload(config)
    run_dir = tmp_path / "run"
    ctx = WorkerContext(
        cfg, run_dir, mock.bootstrap, executor=_executor(executor), hang_grace_s=GRACE_S
    )
    _produce(mock.bootstrap, "in", range(5))
    w = EOSCopierWorker(cfg.users[0], ctx, "copier-0", 0)
    w.start()
    try:
        _steps_until(w, lambda: bool(_ops(run_dir, "commit", "ok")))
        first = w.producer
        assert isinstance(first, ProducerClient) and not first.abandoned
        abandoned_before = abandoned_producers()

        # the group coordinator goes away mid-run: the next transaction's offsets cannot be
        # sent, and librdkafka's send_offsets_to_transaction never returns
        mock.down(GROUP_COORDINATOR)
        _produce(mock.bootstrap, "in", range(5, 10))
        _steps_until(w, lambda: bool(_ops(run_dir, "send_offsets", "info")))

        (hung,) = _ops(run_dir, "send_offsets", "info")
        assert hung["error"].startswith(
            f"client hang: send_offsets_to_transaction(timeout={OP_TIMEOUT_S:g} s) "
            "did not return after "
        )
        assert "librdkafka#5456" in hung["error"]
        assert "the producer is abandoned and replaced" in hung["error"]
        # abandoned, not closed: the handle is kept for the blocked thread; a new instance
        # took the user's place
        assert first.abandoned and first.producer is None
        assert abandoned_producers() == abandoned_before + 1
        new = w.producer
        assert new is not first and new is not None and not new.initialized

        records, hangs_note = read_hangs(run_dir)
        assert hangs_note is None
        (record,) = records
        assert record["process"] == "copier-0" and record["kind"] == "eos_copier"
        assert record["call"] == "send_offsets_to_transaction"
        assert record["timeout_s"] == OP_TIMEOUT_S and record["waited_s"] >= OP_TIMEOUT_S
        assert record["op_id"] == hung["op_id"] and record["txn"] == hung["txn"]
        assert record["issue"] == "librdkafka#5456"
        assert record["library"] == "librdkafka" and record["library_version"]
        assert record["binding_version"] == confluent_kafka.__version__

        findings, note = read_findings(run_dir, [], {})
        assert note is None
        (finding,) = findings
        assert finding["kind"] == "client_hang" and finding["txn"] == hung["txn"]
        line = finding_line(finding)
        assert line.startswith(
            f"client hang: copier-0 (eos_copier, librdkafka {record['library_version']})"
        )
        assert (
            f"send_offsets_to_transaction(timeout={OP_TIMEOUT_S:g} s) never returned "
            "(librdkafka#5456)" in line
        )

        # the coordinator back: the copier, on its new producer, initialises (fencing the
        # abandoned one) and commits again
        mock.up(GROUP_COORDINATOR)
        after = hung["complete_ns"]
        _steps_until(w, lambda: any(r["invoke_ns"] > after for r in _ops(run_dir, "commit", "ok")))
        assert any(r["invoke_ns"] > after for r in _ops(run_dir, "init", "ok"))
        assert w.producer is new and new.initialized
    finally:
        mock.up(GROUP_COORDINATOR)
        w.stop()


@pytest.mark.parametrize("executor", ["gevent", "direct"])
def test_run_bounded_gives_up_on_a_call_that_outlives_its_limit(executor: str) -> None:
    """A real blocking call (waiting on an event) past its limit: the caller stops waiting,
    the call is left running on its thread; a call within its limit returns its result or
    raises its error as run() would."""
    ex = _executor(executor)
    release, finished = threading.Event(), threading.Event()

    def blocked() -> str:
        release.wait()
        finished.set()
        return "late"

    def fails() -> None:
        raise ValueError("its own error")

    pool = ex._gevent.get_hub().threadpool if isinstance(ex, GeventExecutor) else None
    size = pool.maxsize if pool is not None else 0
    try:
        with pytest.raises(CallStillRunning):
            ex.run_bounded(0.2, blocked)
        assert not finished.is_set()  # still blocked where it was left
        if pool is not None:
            assert pool.maxsize == size + 1  # a thread for the others in its place
        assert ex.run_bounded(30.0, lambda x: x * 2, 21) == 42
        with pytest.raises(ValueError, match="its own error"):
            ex.run_bounded(30.0, fails)
    finally:
        release.set()
    assert finished.wait(30)


class _Hangs(FakeProducer):
    """The scripted producer with one transactional call that really blocks (on an event)
    until the test releases it, as librdkafka's call does."""

    call = ""
    release = threading.Event()

    def _blocks(self, name: str) -> None:
        if name == self.call:
            self.calls.append(name)
            self.release.wait()

    def init_transactions(self, timeout: float) -> None:
        self._blocks("init_transactions")
        super().init_transactions(timeout)

    def commit_transaction(self, timeout: float) -> None:
        self._blocks("commit_transaction")
        super().commit_transaction(timeout)

    def abort_transaction(self, timeout: float) -> None:
        self._blocks("abort_transaction")
        super().abort_transaction(timeout)

    def close(self) -> None:
        if self.call == "close":
            self.calls.append("close")
            self.release.wait()
            return
        super().close()


OP_OF = {"init_transactions": "init", "commit_transaction": "commit", "abort_transaction": "abort"}


@pytest.mark.parametrize("call", sorted(OP_OF))
def test_a_hung_call_is_info_never_retried_and_its_producer_never_touched_again(
    call: str, tmp_path: Path
) -> None:
    """init, commit and abort as send_offsets: the op ``info`` naming the hang, no retry
    (``retries`` left notwithstanding), the reset raised, the hang reported once, and the
    handle given no further call, not even by close(abort_open=True)."""
    _Hangs.call, _Hangs.release = call, threading.Event()
    writer = HistoryWriter(tmp_path, "txn-0")
    client = ProducerClient(
        {"transactional.id": "txn-0"}, writer, producer_factory=_Hangs, hang_grace_s=0.2
    )
    hangs: list[tuple[str, str]] = []
    client.on_hang = lambda op, hang: hangs.append((op.type, hang.call))
    fake = client.producer
    assert isinstance(fake, _Hangs)
    try:
        if call != "init_transactions":
            client.init(5.0)
            client.begin(0)
        with pytest.raises(ProducerReset) as reset:
            if call == "init_transactions":
                client.init(0.2)
            elif call == "commit_transaction":
                client.commit(0, 0.2, retries=3)
            else:
                client.abort(0, 0.2, retries=3)
        assert isinstance(reset.value.__cause__, CallHung)
        assert fake.calls.count(call) == 1  # never retried
        assert hangs == [(OP_OF[call], call)]
        assert client.abandoned and client.open_txn is None
        calls = list(fake.calls)
        client.close(abort_open=True)
        assert fake.calls == calls and client.producer is None  # no abort, flush, close
    finally:
        _Hangs.release.set()
        writer.close()
    rows = [json.loads(line) for line in (tmp_path / "history" / "txn-0.jsonl").open()]
    (done,) = [r for r in rows if r["type"] == OP_OF[call] and "outcome" in r]
    assert done["outcome"] == "info"
    assert done["error"].startswith(f"client hang: {call}(timeout=0.2 s) did not return after ")
    assert "librdkafka#5456" in done["error"]


def test_a_crashable_copier_in_a_process_of_its_own_outlives_a_hang_and_exits(
    tmp_path: Path,
) -> None:
    """The same hang in a user's own process (the crashable subprocess; an isolated user's
    is the same worker loop, also without gevent): the hung call is given up on after the
    real grace (HANG_GRACE_S), the process copies on once the coordinator is back, and a
    SIGTERM still stops it cleanly, the abandoned handle and its blocked thread
    notwithstanding."""
    mock, config = _copier_on_mock()
    run_dir = tmp_path / "run"
    _produce(mock.bootstrap, "in", range(5))
    client = CrashableClient(
        config, 0, run_dir, mock.bootstrap, process="copier-0", log_path=tmp_path / "c.log"
    )
    client.start()
    try:
        eventually(lambda: bool(_ops(run_dir, "commit", "ok")))
        mock.down(GROUP_COORDINATOR)
        _produce(mock.bootstrap, "in", range(5, 10))
        eventually(lambda: bool(read_hangs(run_dir)[0]))
        (record,) = read_hangs(run_dir)[0]
        assert record["call"] == "send_offsets_to_transaction"
        assert record["waited_s"] >= OP_TIMEOUT_S + HANG_GRACE_S
        (hung,) = _ops(run_dir, "send_offsets", "info")
        assert hung["op_id"] == record["op_id"] and "librdkafka#5456" in hung["error"]
        mock.up(GROUP_COORDINATOR)
        after = hung["complete_ns"]
        eventually(lambda: any(r["invoke_ns"] > after for r in _ops(run_dir, "commit", "ok")))
    finally:
        mock.up(GROUP_COORDINATOR)
        code = client.stop()
    assert code == 0
    assert client.wait_line("STOPPED", 30.0) == "STOPPED"


def test_a_close_that_never_returns_is_given_up_and_its_producer_abandoned(
    tmp_path: Path,
) -> None:
    """close() of librdkafka's producer aborts a transaction it still takes for open (an
    abort that failed) and waits for the coordinator without a limit: the harness stops
    waiting ``hang_grace_s`` after the close's timeout and abandons the handle."""
    _Hangs.call, _Hangs.release = "close", threading.Event()
    writer = HistoryWriter(tmp_path, "txn-0")
    client = ProducerClient(
        {"transactional.id": "txn-0"}, writer, producer_factory=_Hangs, hang_grace_s=0.2
    )
    fake = client.producer
    assert isinstance(fake, _Hangs)
    try:
        client.init(5.0)
        client.close(timeout_s=0.2)  # returns: given up on
        assert fake.calls.count("close") == 1
        assert client.abandoned and client.producer is None
    finally:
        _Hangs.release.set()
        writer.close()
