"""A recording producer client on our own Kafka producer (``harness/clients``).

:class:`OurProducerClient` has the interface of :class:`~.clients.ProducerClient` (the
confluent-kafka one), so the transactional producer and copier workers drive it unchanged,
and it writes the same history records (INIT, BEGIN, SEND, SEND_OFFSETS, COMMIT, ABORT with
the same outcome rules), so every checker judges its runs. Differences: the producer id and
epoch are exact (our producer knows them; no statistics snapshot), and the transaction
protocol follows the cluster's ``transaction.version`` (TV2 where offered) or the spec's
forced one.

The producer runs on the process's asyncio loop thread (:mod:`..clients.bridge`); calls
wait on it (a greenlet under locust waits without blocking the others). Acknowledgements
arrive on the loop thread, which only queues them: the SEND completions are written on the
caller's side after each call (a flush before commit records every ack before the COMMIT
invocation), because under gevent the history writer's lock is a gevent lock, which a
foreign OS thread must not contend for.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from ..clients import (
    AbortableError,
    FatalError,
    GroupMetadata,
    KafkaClientError,
    Producer,
    ProducerConfig,
    RecordMetadata,
    RetriableError,
)
from ..clients.bridge import LoopThread
from ..history.schema import EventType, Outcome
from ..history.writer import HistoryWriter, Op
from .clients import PAD_HEADER, ClientError, EventQueue, OperationFailed, ProducerReset, Reporter

T = TypeVar("T")


def _no_report(_rt: str, _name: str, _ms: float, _exc: BaseException | None) -> None:
    return None


def describe(exc: BaseException) -> str:
    """``NAME (class): message``, as ``clients.error_name`` writes librdkafka's errors."""
    if isinstance(exc, KafkaClientError):
        return f"{exc.name} ({exc.error_class.value}): {exc}"
    return f"{type(exc).__name__}: {exc}"


def _ms_since(ns: int) -> float:
    import time

    return (time.time_ns() - ns) / 1e6


class OurProducerClient:
    """Our producer, recording every operation (see :class:`~.clients.ProducerClient`)."""

    def __init__(
        self,
        config: ProducerConfig,
        writer: HistoryWriter,
        *,
        reporter: Reporter | None = None,
        request_type: str = "txn",
        padding_bytes: int = 0,
        group_id: str | None = None,
        loop: LoopThread | None = None,
    ) -> None:
        self.writer = writer
        self.group_id = group_id
        self.events = EventQueue(reporter or _no_report)
        self.request_type = request_type
        self.transactional_id = config.transactional_id
        self._pad = b"\0" * padding_bytes if padding_bytes else None
        self.loop = loop or LoopThread.shared()
        self.producer: Producer | None = self.loop.call(lambda: Producer(config))
        self.initialized = False
        self.open_txn: int | None = None
        self.txn_abortable = False
        self.fatal = False
        self.unacked = 0
        self._acks: collections.deque[Callable[[], None]] = collections.deque()

    # -- plumbing -----------------------------------------------------------------------------

    def _p(self) -> Producer:
        if self.producer is None:
            raise ProducerReset("producer closed", None, RuntimeError("closed"))
        return self.producer

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        try:
            return self.loop.run(coro, timeout_s + 5.0)
        finally:
            self._drain()

    def _drain(self) -> None:
        """Record the acknowledgements queued by the loop thread, then report to locust."""
        while True:
            try:
                record = self._acks.popleft()
            except IndexError:
                break
            record()
        self.events.drain()

    def id_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"transactional_id": self.transactional_id}
        if self.group_id is not None:
            out["group_id"] = self.group_id
        p = self.producer
        if p is not None and p.ids.valid:
            out["producer_id"] = p.ids.producer_id
            out["producer_epoch"] = p.ids.epoch
        return out

    def _report(self, name: str, started_ns: int, outcome: Outcome, error: str | None) -> None:
        exc = None if outcome == Outcome.OK else OperationFailed(f"{outcome.value}: {error}")
        self.events.put(self.request_type, name, _ms_since(started_ns), exc)

    def _finish(
        self, op: Op, name: str, outcome: Outcome, error: str | None = None, **fields: Any
    ) -> None:
        self.writer.complete(op, outcome, error=error, **{**self.id_fields(), **fields})
        self._report(name, op.invoke_ns, outcome, error)
        self._drain()

    # -- transactional API --------------------------------------------------------------------

    def init(self, timeout_s: float) -> Outcome:
        op = self.writer.invoke(EventType.INIT, transactional_id=self.transactional_id)
        p = self._p()
        try:
            self._run(p.init_transactions(timeout_s), timeout_s)
        except KafkaClientError as e:
            # A timed-out InitProducerId may still have bumped the epoch: unknown.
            outcome = Outcome.INFO if isinstance(e, RetriableError) else Outcome.FAIL
            self._finish(op, "init", outcome, describe(e))
            self.fatal = True
            raise ProducerReset("init_transactions", None, e) from e
        self.initialized = True
        self._finish(op, "init", Outcome.OK)
        return Outcome.OK

    def begin(self, txn: int) -> None:
        op = self.writer.invoke(EventType.BEGIN, txn=txn, **self.id_fields())
        p = self._p()
        try:
            self._run(p.begin_transaction(), 30.0)
        except KafkaClientError as e:
            self._finish(op, "begin", Outcome.FAIL, describe(e))
            if isinstance(e, FatalError):
                self.fatal = True
                raise ProducerReset("begin_transaction", None, e) from e
            raise ClientError("begin_transaction", None, e) from e
        self.open_txn = txn
        self.txn_abortable = False
        self._finish(op, "begin", Outcome.OK)

    def send(
        self,
        topic: str,
        partition: int,
        value: str,
        *,
        key: str | None = None,
        txn: int | None = None,
        source: str | None = None,
    ) -> Op:
        """Produce one record (SEND op, completed by its acknowledgement)."""
        item: dict[str, Any] = {"topic": topic, "partition": partition, "value": value, "key": key}
        if source is not None:
            item["source"] = source
        op = self.writer.invoke(EventType.SEND, items=[item], txn=txn, **self.id_fields())
        p = self._p()
        headers = [(PAD_HEADER, self._pad)] if self._pad else []

        def queue() -> asyncio.Future[RecordMetadata]:
            fut = p.send(
                topic,
                partition,
                value.encode(),
                key=key.encode() if key is not None else None,
                headers=headers,
            )
            fut.add_done_callback(lambda f: self._on_delivery(op, item, f))
            return fut

        try:
            self.loop.call(queue)
        except KafkaClientError as e:
            self._finish(op, "send", Outcome.FAIL, describe(e))
            if isinstance(e, FatalError):
                self.fatal = True
                raise ProducerReset("produce", None, e) from e
            self.txn_abortable = True
            raise ClientError("produce", None, e) from e
        self.unacked += 1
        return op

    def _on_delivery(
        self, op: Op, item: dict[str, Any], fut: asyncio.Future[RecordMetadata]
    ) -> None:
        # Runs on the loop thread: state flags only; the history line is queued.
        self.unacked -= 1
        exc = fut.exception() if not fut.cancelled() else RetriableError("cancelled")
        if exc is None:
            meta = fut.result()
            done = {**item, "offset": meta.offset if meta.offset >= 0 else None}
            self._acks.append(lambda: self._record_ack(op, Outcome.OK, None, [done]))
            return
        maybe = isinstance(exc, KafkaClientError) and exc.maybe_written
        if self.open_txn is not None or isinstance(exc, FatalError | AbortableError):
            self.txn_abortable = True
        if isinstance(exc, FatalError):
            self.fatal = True
        outcome = Outcome.INFO if maybe else Outcome.FAIL
        error = describe(exc)
        self._acks.append(lambda: self._record_ack(op, outcome, error, None))

    def _record_ack(
        self, op: Op, outcome: Outcome, error: str | None, items: list[dict[str, Any]] | None
    ) -> None:
        self.writer.complete(op, outcome, items=items, error=error, **self.id_fields())
        self._report("send", op.invoke_ns, outcome, error)

    def poll(self, timeout_s: float = 0.0) -> None:
        """Record the acknowledgements that arrived (and report them to locust)."""
        self._drain()

    def flush(self, timeout_s: float) -> int:
        p = self._p()
        with contextlib.suppress(KafkaClientError):
            self._run(p.flush(timeout_s), timeout_s)
        return max(self.unacked, 0)

    def send_offsets(
        self,
        txn: int,
        offsets: list[Any],
        group_metadata: Any,
        group_id: str | None,
        timeout_s: float,
    ) -> None:
        """send_offsets_to_transaction (SEND_OFFSETS op). ``offsets`` are confluent-kafka
        TopicPartitions; ``group_metadata`` is a consumer's ``consumer_group_metadata()``
        or a :class:`~..clients.GroupMetadata`."""
        items = [
            {"topic": tp.topic, "partition": tp.partition, "offset": tp.offset} for tp in offsets
        ]
        fields = {**self.id_fields(), "group_id": group_id}
        op = self.writer.invoke(EventType.SEND_OFFSETS, items=items, txn=txn, **fields)
        group = (
            group_metadata
            if isinstance(group_metadata, GroupMetadata)
            else GroupMetadata.from_librdkafka(bytes(group_metadata))
        )
        triples = [(tp.topic, tp.partition, tp.offset) for tp in offsets]
        p = self._p()
        try:
            self._run(p.send_offsets_to_transaction(triples, group, timeout_s), timeout_s)
        except KafkaClientError as e:
            outcome = Outcome.INFO if isinstance(e, RetriableError) else Outcome.FAIL
            self._finish(op, "send_offsets", outcome, describe(e))
            if isinstance(e, FatalError):
                self.fatal = True
                raise ProducerReset("send_offsets_to_transaction", None, e) from e
            self.txn_abortable = True  # do not commit a transaction with unknown offsets
            raise ClientError("send_offsets_to_transaction", None, e) from e
        self._finish(op, "send_offsets", Outcome.OK)

    def commit(self, txn: int, timeout_s: float, retries: int) -> Outcome:
        """COMMIT op; an abortable error aborts (ABORT op) and returns ``fail``; an outcome
        that stays unknown raises :class:`ProducerReset`."""
        op = self.writer.invoke(EventType.COMMIT, txn=txn, **self.id_fields())
        p = self._p()
        attempt = 0
        while True:
            try:
                self._run(p.commit_transaction(timeout_s), timeout_s)
            except AbortableError as e:
                self._finish(op, "commit", Outcome.FAIL, describe(e))
                self.abort(txn, timeout_s, retries)
                return Outcome.FAIL
            except RetriableError as e:
                if attempt < retries:
                    attempt += 1
                    continue
                self._unknown(op, e)
                raise ProducerReset("commit_transaction", None, e) from e
            except KafkaClientError as e:
                self._unknown(op, e)
                raise ProducerReset("commit_transaction", None, e) from e
            self.open_txn = None
            self._finish(op, "commit", Outcome.OK)
            return Outcome.OK

    def _unknown(self, op: Op, e: KafkaClientError) -> None:
        self.fatal = True
        self.open_txn = None
        self._finish(op, "commit", Outcome.INFO, describe(e))

    def abort(self, txn: int, timeout_s: float, retries: int) -> Outcome:
        op = self.writer.invoke(EventType.ABORT, txn=txn, **self.id_fields())
        p = self._p()
        attempt = 0
        while True:
            try:
                self._run(p.abort_transaction(timeout_s), timeout_s)
            except RetriableError as e:
                if attempt < retries:
                    attempt += 1
                    continue
                self._finish(op, "abort", Outcome.INFO, describe(e))
                self.open_txn = None
                self.fatal = True
                raise ProducerReset("abort_transaction", None, e) from e
            except KafkaClientError as e:
                self._finish(op, "abort", Outcome.INFO, describe(e))
                self.open_txn = None
                self.fatal = True
                raise ProducerReset("abort_transaction", None, e) from e
            self.open_txn = None
            self.txn_abortable = False
            self._finish(op, "abort", Outcome.OK)
            return Outcome.OK

    def close(self, *, abort_open: bool = False, timeout_s: float = 10.0) -> None:
        """Release the producer; an open transaction stays open unless ``abort_open``."""
        p = self.producer
        if p is None:
            return
        try:
            if abort_open and self.open_txn is not None and self.initialized:
                with contextlib.suppress(ClientError):
                    self.abort(self.open_txn, timeout_s, 0)
            with contextlib.suppress(KafkaClientError):
                self._run(p.close(timeout_s), timeout_s)
        finally:
            self.producer = None
            self._drain()


def our_config(
    conf: Mapping[str, Any], transaction_version: int | None, **extra: Any
) -> ProducerConfig:
    """Our producer's settings from the librdkafka-style properties the workers build.

    A request gives up after half the transaction timeout (5-30 s): one that waits longer
    (a connection parked by the fault proxy while its node is down) only finds its
    transaction aborted by the coordinator."""
    txn_timeout_ms = int(conf.get("transaction.timeout.ms", 60_000))
    return ProducerConfig(
        bootstrap=str(conf["bootstrap.servers"]),
        client_id=str(conf.get("client.id", "txnchaos-producer")),
        transactional_id=conf.get("transactional.id"),
        transaction_timeout_ms=txn_timeout_ms,
        request_timeout_ms=min(30_000, max(5_000, txn_timeout_ms // 2)),
        transaction_version=transaction_version,
        linger_ms=float(conf.get("linger.ms", 5)),
        **extra,
    )
