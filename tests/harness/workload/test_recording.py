"""The confluent-kafka client and our own record identical histories: the same calls meeting
the same classes of error give the same ops, outcomes, items and fields (the error texts name
each library's own errors; producer ids come from librdkafka's statistics or from our
producer, so they are left out of the comparison)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from txnchaos.harness.clients import (
    AbortableError,
    FatalError,
    GroupMetadata,
    KafkaClientError,
    RetriableError,
)
from txnchaos.harness.clients.errors import StateError
from txnchaos.harness.workload.clients import ClientError, ProducerClient, ProducerReset
from txnchaos.harness.workload.ours import OurProducerClient, our_config
from txnchaos.harness.workload.recording import PURGED_BY_ABORT, RecordingProducer
from txnchaos.rundir.writer import HistoryWriter

from .fakes import FakeOurProducer, FakeProducer, kerr
from .helpers import jsonl_lines

CONF = {
    "bootstrap.servers": "127.0.0.1:1",
    "client.id": "p-0",
    "transactional.id": "p-0",
    "transaction.timeout.ms": 60_000,
}

#: error class -> (confluent-kafka's error, our client's)
ERRORS: dict[str, tuple[Callable[[], BaseException], Callable[[], KafkaClientError]]] = {
    "retriable": (
        lambda: kerr(KafkaError._TIMED_OUT, retriable=True),
        lambda: RetriableError("timed out"),
    ),
    "abortable": (
        lambda: kerr(KafkaError.INVALID_TXN_STATE, abortable=True),
        lambda: AbortableError("abortable", 48),
    ),
    "fatal": (lambda: kerr(KafkaError._FENCED, fatal=True), lambda: FatalError("fenced", 90)),
    "other": (lambda: kerr(KafkaError._STATE), lambda: StateError("not in a transaction")),
}


class Client:
    """One recording client over its library's fake, scripted by error class."""

    def __init__(self, library: str, run_dir: Path) -> None:
        self.writer = HistoryWriter(run_dir, "p-0")
        self.library = library
        self.client: RecordingProducer
        if library == "confluent":
            self.client = ProducerClient(CONF, self.writer, producer_factory=FakeProducer)
            self.group: Any = None
        else:
            self.client = OurProducerClient(
                our_config(CONF, None), self.writer, producer_factory=FakeOurProducer
            )
            self.group = GroupMetadata("g", 3, "member")

    @property
    def fake(self) -> Any:
        return self.client.producer  # type: ignore[attr-defined]

    def script(self, call: str, *classes: str | None) -> None:
        pick = 0 if self.library == "confluent" else 1
        self.fake.script[call] = [None if c is None else ERRORS[c][pick]() for c in classes]


def ops(run_dir: Path) -> list[tuple[Any, ...]]:
    """Each completed op with what must agree between the libraries."""
    out = []
    for r in sorted(
        (r for r in jsonl_lines(run_dir) if r.get("outcome")), key=lambda r: r["op_id"]
    ):
        failed = r.get("error") is not None  # its text names the library's own error
        items = [tuple(sorted(i.items())) for i in r.get("items") or []]
        fields = (r.get("txn"), r.get("transactional_id"), r.get("group_id"))
        out.append((r["type"], r["outcome"], failed, items, fields))
    return out


def drive(c: Client) -> None:
    p = c.client
    c.script("init_transactions", "retriable")
    with pytest.raises(ProducerReset):
        p.init(5)
    p.init(5)
    # committed, after a retriable commit error settled by a retry
    c.script("commit_transaction", "retriable", None)
    p.begin(0)
    p.send("a", 0, "v0", key="0", txn=0)
    p.send("a", 1, "v1", txn=0)
    p.flush(5)
    assert p.commit(0, 5, 2).value == "ok"
    # an abortable commit error: fail, then the abort
    c.script("commit_transaction", "abortable")
    p.begin(1)
    p.send("a", 0, "v2", txn=1, source="x")
    assert p.commit(1, 5, 2).value == "fail"
    # offsets in doubt: the transaction must abort; a retriable abort is retried
    c.script("send_offsets_to_transaction", "retriable")
    c.script("abort_transaction", "retriable", None)
    p.begin(2)
    p.send("a", 1, "v3", txn=2)  # never flushed: the abort purges it
    with pytest.raises(ClientError) as offsets_error:
        p.send_offsets(2, [TopicPartition("in", 0, 5)], c.group, "g", 5)
    assert not isinstance(offsets_error.value, ProducerReset) and p.txn_abortable
    p.abort(2, 5, 1)
    assert not p.txn_abortable and p.open_txn is None
    # a begin refused by the client's state is a failed begin, not a reset
    c.script("begin_transaction", "other")
    with pytest.raises(ClientError) as begin_error:
        p.begin(3)
    assert not isinstance(begin_error.value, ProducerReset)
    # a fatal commit error: the outcome is unknown and the producer must be recreated
    c.script("commit_transaction", "fatal")
    p.begin(4)
    with pytest.raises(ProducerReset):
        p.commit(4, 5, 2)
    assert p.fatal and p.open_txn is None
    p.close()
    c.writer.close()


def test_both_clients_record_the_same_history(tmp_path: Path) -> None:
    histories = {}
    for library in ("confluent", "ours"):
        run_dir = tmp_path / library
        drive(Client(library, run_dir))
        histories[library] = ops(run_dir)
    assert histories["confluent"] == histories["ours"]
    kinds = [(t, o) for t, o, *_ in histories["ours"]]
    assert kinds == [
        ("init", "info"),
        ("init", "ok"),
        ("begin", "ok"),
        ("send", "ok"),
        ("send", "ok"),
        ("commit", "ok"),
        ("begin", "ok"),
        ("send", "ok"),
        ("commit", "fail"),
        ("abort", "ok"),
        ("begin", "ok"),
        ("send", "fail"),
        ("send_offsets", "info"),
        ("abort", "ok"),
        ("begin", "fail"),
        ("begin", "ok"),
        ("commit", "info"),
    ]


@pytest.mark.parametrize("library", ["confluent", "ours"])
def test_a_stopping_run_does_not_retry_a_commit_or_an_abort(library: str, tmp_path: Path) -> None:
    """Once the run stops its users, a retriable commit or abort error is not retried: the
    op is recorded unknown and the producer reset (a cluster that never completes the
    transaction would otherwise hold the stop for every retry's timeout)."""
    c = Client(library, tmp_path)
    stopping = [False]
    c.client.stopping = lambda: stopping[0]
    p = c.client
    p.init(5)
    c.script("commit_transaction", "retriable", None)
    p.begin(0)
    assert p.commit(0, 5, 2).value == "ok"  # retried while the run goes on
    stopping[0] = True
    for call, end in (("commit_transaction", p.commit), ("abort_transaction", p.abort)):
        c.script(call, "retriable", None)
        p.begin(1)
        with pytest.raises(ProducerReset):
            end(1, 5, 2)
        assert c.fake.script[call] == [None], "retried although the run is stopping"
    p.close()
    c.writer.close()
    ends = [(t, o) for t, o, *_ in ops(tmp_path) if t in ("commit", "abort")]
    assert ends == [("commit", "ok"), ("commit", "info"), ("abort", "info")]


@pytest.mark.parametrize("library", ["confluent", "ours"])
@pytest.mark.parametrize("on_purpose", [True, False])
def test_sends_a_deliberate_abort_purges_are_no_locust_failures(
    library: str, on_purpose: bool, tmp_path: Path
) -> None:
    """A transaction the scenario aborts on purpose (abort_probability) purges its unsent
    records: locust counts them under their own name, not as failed sends; an abort an error
    forced keeps them failures.  The history records ``fail`` either way."""
    c = Client(library, tmp_path)
    events: list[tuple[str, BaseException | None]] = []
    c.client.events.reporter = lambda _t, name, _ms, exc: events.append((name, exc))
    p = c.client
    p.init(5)
    p.begin(0)
    p.send("a", 0, "v0", txn=0)  # never flushed: the abort purges it
    p.abort(0, 5, 1, on_purpose=on_purpose)
    p.close()
    c.writer.close()
    sends = [(name, exc) for name, exc in events if name.startswith("send")]
    if on_purpose:
        assert sends == [(PURGED_BY_ABORT, None)]
    else:
        assert [name for name, _ in sends] == ["send"] and sends[0][1] is not None
    assert [(t, o) for t, o, *_ in ops(tmp_path) if t == "send"] == [("send", "fail")]
