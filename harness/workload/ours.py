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

from ...rundir.schema import Outcome
from ...rundir.writer import HistoryWriter, Op
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
from ..clients.config import DEFAULT_TRANSACTION_TIMEOUT_MS
from .recording import (
    PAD_HEADER,
    ClientError,
    ErrorClass,
    Failure,
    ProducerReset,
    RecordingProducer,
    Reporter,
)

T = TypeVar("T")


def describe(exc: BaseException) -> str:
    """``NAME (class): message``, as ``clients.error_name`` writes librdkafka's errors."""
    if isinstance(exc, KafkaClientError):
        return f"{exc.name} ({exc.error_class.value}): {exc}"
    return f"{type(exc).__name__}: {exc}"


def error_class(exc: KafkaClientError) -> ErrorClass:
    """By the exception's type: a state error (a call the producer's state does not allow)
    is none of fatal, abortable or retriable."""
    if isinstance(exc, FatalError):
        return ErrorClass.FATAL
    if isinstance(exc, AbortableError):
        return ErrorClass.ABORTABLE
    if isinstance(exc, RetriableError):
        return ErrorClass.RETRIABLE
    return ErrorClass.OTHER


class OurProducerClient(RecordingProducer):
    """Our producer, recording every operation (see :class:`~.recording.RecordingProducer`)."""

    def __init__(
        self,
        config: ProducerConfig,
        writer: HistoryWriter,
        *,
        reporter: Reporter | None = None,
        request_type: str = "txn",
        padding_bytes: int = 0,
        group_id: str | None = None,
        stopping: Callable[[], bool] | None = None,
        loop: LoopThread | None = None,
        producer_factory: Callable[[ProducerConfig], Producer] = Producer,
    ) -> None:
        super().__init__(
            writer,
            transactional_id=config.transactional_id,
            reporter=reporter,
            request_type=request_type,
            padding_bytes=padding_bytes,
            group_id=group_id,
            stopping=stopping,
        )
        self.loop = loop or LoopThread.shared()
        self.producer: Producer | None = self.loop.call(lambda: producer_factory(config))
        self._acks: collections.deque[Callable[[], None]] = collections.deque()

    # -- plumbing -----------------------------------------------------------------------------

    def _p(self) -> Producer:
        if self.producer is None:
            raise ProducerReset(
                "producer closed", Failure(ErrorClass.OTHER, None), RuntimeError("closed")
            )
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

    def producer_ids(self) -> dict[str, Any]:
        p = self.producer
        if p is not None and p.ids.valid:
            return {"producer_id": p.ids.producer_id, "producer_epoch": p.ids.epoch}
        return {}

    def translate_error(self, exc: BaseException) -> Failure | None:
        if not isinstance(exc, KafkaClientError):
            return None
        return Failure(error_class(exc), describe(exc))

    def _call_init(self, timeout_s: float) -> None:
        p = self._p()
        # each of the producer's re-initialisations has a timeout of its own
        self._run(p.init_transactions(timeout_s), timeout_s * (1 + p.config.reinitializations))

    def _call_begin(self) -> None:
        self._run(self._p().begin_transaction(), 30.0)

    def _call_send_offsets(self, offsets: list[Any], group_metadata: Any, timeout_s: float) -> None:
        """``group_metadata``: a consumer's ``consumer_group_metadata()`` or a
        :class:`~..clients.GroupMetadata`."""
        group = (
            group_metadata
            if isinstance(group_metadata, GroupMetadata)
            else GroupMetadata.from_librdkafka(bytes(group_metadata))
        )
        triples = [(tp.topic, tp.partition, tp.offset) for tp in offsets]
        p = self._p()
        self._run(p.send_offsets_to_transaction(triples, group, timeout_s), timeout_s)

    def _call_commit(self, timeout_s: float) -> None:
        self._run(self._p().commit_transaction(timeout_s), timeout_s)

    def _call_abort(self, timeout_s: float) -> None:
        self._run(self._p().abort_transaction(timeout_s), timeout_s)

    # -- records ------------------------------------------------------------------------------

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
        op, item = self._invoke_send(topic, partition, value, key, txn, source)
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
            failure = Failure(error_class(e), describe(e))
            if failure.error_class != ErrorClass.FATAL:
                self.txn_abortable = True  # the transaction misses a record
            self._send_rejected(op, failure, e)
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

    def poll(self, timeout_s: float = 0.0) -> None:
        """Record the acknowledgements that arrived (and report them to locust)."""
        self._drain()

    def flush(self, timeout_s: float) -> int:
        p = self._p()
        with contextlib.suppress(KafkaClientError):
            self._run(p.flush(timeout_s), timeout_s)
        return max(self.unacked, 0)

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
    """Our producer's settings from the librdkafka-style properties the workers build
    (with the scenario's SASL keys, ``harness.client_security``).

    A request gives up after half the transaction timeout (5-30 s): one that waits longer
    (a connection parked by the fault proxy while its node is down) only finds its
    transaction aborted by the coordinator."""
    set_timeout = conf.get("transaction.timeout.ms")
    txn_timeout_ms = int(set_timeout or DEFAULT_TRANSACTION_TIMEOUT_MS)
    return ProducerConfig(
        bootstrap=str(conf["bootstrap.servers"]),
        client_id=str(conf.get("client.id", "txnchaos-producer")),
        transactional_id=conf.get("transactional.id"),
        transaction_timeout_ms=None if set_timeout is None else int(set_timeout),
        request_timeout_ms=min(30_000, max(5_000, txn_timeout_ms // 2)),
        transaction_version=transaction_version,
        linger_ms=float(conf.get("linger.ms", 5)),
        security_protocol=str(conf.get("security.protocol", "PLAINTEXT")),
        sasl_mechanism=conf.get("sasl.mechanism"),
        sasl_username=conf.get("sasl.username"),
        sasl_password=conf.get("sasl.password"),
        **extra,
    )
