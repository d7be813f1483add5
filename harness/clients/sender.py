"""Record accumulation and the Produce loop.

Records wait in a queue per partition. One task (the sender) wakes when records arrive (after
``linger_ms``) or a flush asks, and for each partition with nothing in flight turns the
waiting records into one batch, with its sequence numbers, and sends the batches of each
leader in one Produce request. One batch per partition is in flight at a time, so a batch
that certainly failed can give its sequence numbers back, and a retry (same bytes, same
sequence) cannot be overtaken.

Under transaction.version 0/1 a partition's first batch of a transaction waits until
AddPartitionsToTxn has added it (unless the producer misbehaves on purpose: ``after`` adds it
once the write is acknowledged, ``never`` not at all). Under TV2 Produce v12 adds it.

Errors (``errors.PRODUCE``): leader and transient errors are retried until
``delivery_timeout_ms``; an abortable one fails the batch and makes the transaction abortable,
after which records not yet sent fail without being sent; a fatal one makes the producer
unusable. A record's future fails with ``maybe_written`` True only when it may be in the log
(a request whose answer never came).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .batch import Record, encode_batch, record_size
from .config import ProducerConfig
from .connection import API_PRODUCE, AuthenticationError, ConnectionLost, NodeConnection
from .errors import (
    PRODUCE,
    AbortableError,
    Action,
    FatalError,
    KafkaClientError,
    RetriableError,
    UnsupportedError,
    action,
    exception_for,
)
from .metadata import ClusterView
from .producer_state import ProducerIdAndEpoch, ProducerState
from .txn_state import TxnState, TxnStateMachine

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    #: -1 when unknown (DUPLICATE_SEQUENCE_NUMBER: written by an earlier attempt).
    offset: int


@dataclass
class PendingRecord:
    record: Record
    future: asyncio.Future[RecordMetadata]


@dataclass
class Batch:
    topic: str
    partition: int
    records: list[PendingRecord]
    ids: ProducerIdAndEpoch
    base_sequence: int
    payload: bytes
    created: float
    attempts: int = 0
    retry_at: float = 0.0
    #: Some attempt may have reached the broker without an answer.
    maybe_written: bool = False
    fields: dict[str, Any] = field(default_factory=dict)


class Sender:
    def __init__(
        self,
        view: ClusterView,
        state: ProducerState,
        sm: TxnStateMachine,
        config: ProducerConfig,
        add_partitions: Callable[[set[TopicPartition]], Awaitable[None]],
        new_producer_id: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.view = view
        self.state = state
        self.sm = sm
        self.config = config
        self.transactional = config.transactional_id is not None
        self.misbehavior = config.misbehavior
        self._add_partitions = add_partitions
        #: Idempotent producer at the last epoch: a new producer id (InitProducerId).
        self._new_producer_id = new_producer_id
        self.queues: dict[TopicPartition, collections.deque[PendingRecord]] = {}
        self.retries: dict[TopicPartition, Batch] = {}
        self.in_flight: set[TopicPartition] = set()
        self.unfinished = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.flushing = 0
        #: Idempotent producer: bump the epoch locally once nothing is in flight (KIP-360).
        self.idempotent_bump = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._produce_tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sender")

    async def stop(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for t in list(self._produce_tasks):
            t.cancel()
        self.fail_unsent(FatalError("the producer was closed"))

    def wake(self) -> None:
        self._wake.set()

    # -- records ------------------------------------------------------------------------------

    def append(self, topic: str, partition: int, record: Record) -> asyncio.Future[RecordMetadata]:
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self.queues.setdefault((topic, partition), collections.deque()).append(
            PendingRecord(record, fut)
        )
        self.unfinished += 1
        self.idle.clear()
        fut.add_done_callback(self._record_done)
        self._wake.set()
        return fut

    def _record_done(self, fut: asyncio.Future[RecordMetadata]) -> None:
        if not fut.cancelled():
            fut.exception()  # retrieved: an unobserved failure is not logged as lost
        self.unfinished -= 1
        if self.unfinished == 0:
            self.idle.set()

    def fail_unsent(self, error: KafkaClientError) -> int:
        """Fail every record not in flight: queued ones were never sent; batches waiting for a
        retry may have been written. Returns how many failed."""
        n = 0
        for queue in self.queues.values():
            while queue:
                pending = queue.popleft()
                _fail(pending.future, error, maybe_written=False)
                n += 1
        for tp, batch in list(self.retries.items()):
            del self.retries[tp]
            for pending in batch.records:
                _fail(pending.future, error, maybe_written=batch.maybe_written)
                n += 1
        return n

    def has_unsent(self) -> bool:
        return any(self.queues.values()) or bool(self.retries)

    async def flush(self) -> None:
        self.flushing += 1
        try:
            self._wake.set()
            await self.idle.wait()
        finally:
            self.flushing -= 1

    # -- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        linger = self.config.linger_ms / 1000
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if linger > 0 and not self.flushing:
                await asyncio.sleep(linger)
            try:
                await self._pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sender pass failed")
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                self._wake.set()

    def _doomed(self) -> KafkaClientError | None:
        sm = self.sm
        if sm.state is TxnState.FATAL_ERROR:
            return sm.fatal or FatalError("fatal error")
        if self.transactional and sm.state in (TxnState.ABORTABLE_ERROR, TxnState.ABORTING):
            return sm.book.error or exception_for(Action.ABORTABLE, "transaction aborted", 0)
        return None

    async def _pass(self) -> None:
        doomed = self._doomed()
        if doomed is not None:
            self.fail_unsent(doomed)
            return
        book = self.sm.book
        mode = self.misbehavior.add_partitions
        explicit = self.transactional and book.tv < 2
        if explicit and book.pending:
            if mode == "before":
                await self._add_partitions(set(book.pending))
            elif mode == "after":
                done = {
                    tp
                    for tp in book.pending
                    if tp not in self.in_flight
                    and not self.queues.get(tp)
                    and tp not in self.retries
                    and tp in book.written
                }
                if done:
                    await self._add_partitions(done)
            doomed = self._doomed()
            if doomed is not None:
                self.fail_unsent(doomed)
                return
        if self.idempotent_bump:
            if self.in_flight:
                return
            if not self.state.bump_locally() and self._new_producer_id is not None:
                # The epoch is exhausted: a new producer id, as Kafka's Java client does
                # (resetIdempotentProducerId); a failure leaves the bump for the next pass.
                await self._new_producer_id()
            self.idempotent_bump = False
        now = time.monotonic()
        by_leader: dict[int, list[Batch]] = {}
        next_retry: float | None = None
        for tp in sorted(set(self.queues) | set(self.retries)):
            if tp in self.in_flight:
                continue
            if explicit and mode == "before" and tp not in book.added:
                continue
            batch = self.retries.get(tp)
            if batch is not None and batch.retry_at > now:
                next_retry = min(next_retry or batch.retry_at, batch.retry_at)
                continue
            if batch is None and not self.queues.get(tp):
                continue
            try:
                conn = await self.view.leader(*tp)
            except (RetriableError, ConnectionLost) as exc:
                if batch is None:
                    self._expire_queued(tp, exc)
                next_retry = min(next_retry or now + 0.1, now + self.config.retry_backoff_ms / 1000)
                continue
            if batch is None:
                batch = self._new_batch(tp, now)
            else:
                del self.retries[tp]
            self.in_flight.add(tp)
            by_leader.setdefault(conn.node_id, []).append(batch)
        for node_id, batches in by_leader.items():
            task = asyncio.get_running_loop().create_task(
                self._produce(self.view.connection(node_id), batches)
            )
            self._produce_tasks.add(task)
            task.add_done_callback(self._produce_tasks.discard)
        if next_retry is not None:
            asyncio.get_running_loop().call_at(
                asyncio.get_running_loop().time() + max(0.0, next_retry - now), self._wake.set
            )

    def _expire_queued(self, tp: TopicPartition, cause: KafkaClientError) -> None:
        """Records that could not be sent within ``delivery_timeout_ms`` (no leader) fail,
        never sent, and doom the transaction."""
        queue = self.queues.get(tp)
        limit_ms = time.time() * 1000 - self.config.delivery_timeout_ms
        if not queue or queue[0].record.timestamp_ms > limit_ms:
            return
        error = RetriableError(f"delivery timed out ({cause})", cause.code)
        while queue:
            _fail(queue.popleft().future, error, maybe_written=False)
        if self.transactional:
            self.sm.abortable(_as_abortable(error), bump=True)

    def _new_batch(self, tp: TopicPartition, now: float) -> Batch:
        queue = self.queues[tp]
        records: list[PendingRecord] = []
        size = 0
        while queue and (not records or size + record_size(queue[0].record) <= self.max_bytes):
            pending = queue.popleft()
            records.append(pending)
            size += record_size(pending.record)
        ids = self.state.current
        base = self.state.take_sequence(tp[0], tp[1], len(records))
        payload = encode_batch(
            [p.record for p in records],
            producer_id=ids.producer_id,
            producer_epoch=ids.epoch,
            base_sequence=base,
            transactional=self.transactional,
        )
        if self.transactional:
            self.sm.book.started = True
            self.sm.book.written.add(tp)
        return Batch(tp[0], tp[1], records, ids, base, payload, now)

    @property
    def max_bytes(self) -> int:
        return self.config.batch_max_bytes

    # -- one Produce request ------------------------------------------------------------------

    def produce_request(self, conn: NodeConnection, batches: list[Batch], tv: int) -> Any:
        """The Produce entity for ``batches`` (v12 under TV2, at most v11 otherwise)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for b in batches:
            by_topic.setdefault(b.topic, []).append({"index": b.partition, "records": b.payload})
        cap = 12 if tv >= 2 else 11
        version = conn.version(API_PRODUCE, cap)
        if tv >= 2 and version < 12:
            raise UnsupportedError("transaction.version 2 needs Produce v12")
        return conn.build(
            API_PRODUCE,
            {
                "transactional_id": self.config.transactional_id,
                "acks": -1,
                "timeout": self.config.request_timeout_ms,
                "topic_data": [
                    {"name": t, "partition_data": parts} for t, parts in by_topic.items()
                ],
            },
            version=version,
        )

    async def _produce(self, conn: NodeConnection, batches: list[Batch]) -> None:
        tv = self.sm.book.tv if self.transactional else 0
        try:
            for b in batches:
                b.attempts += 1
            try:
                await conn.negotiate(self.config.request_timeout_ms / 1000)
                request = self.produce_request(conn, batches, tv)
                for b in batches:
                    b.maybe_written = True
                response = await conn.send_entity(request, self.config.request_timeout_ms / 1000)
            except (UnsupportedError, AuthenticationError) as exc:
                for b in batches:
                    self._failed(b, exc, Action.FATAL)
                return
            except (ConnectionLost, RetriableError) as exc:
                for b in batches:
                    self.view.forget_leader(b.topic, b.partition)
                    self._retry(b, exc)
                return
            results: dict[TopicPartition, Any] = {}
            for t in response.responses:
                for p in t.partition_responses:
                    results[(t.name, int(p.index))] = p
            for b in batches:
                p = results.get((b.topic, b.partition))
                if p is None:
                    self._retry(b, RetriableError("no answer for the partition"))
                    continue
                self._handle(b, int(p.error_code), int(p.base_offset), p)
        finally:
            for b in batches:
                self.in_flight.discard((b.topic, b.partition))
            self._wake.set()

    def _handle(self, b: Batch, code: int, base_offset: int, p: Any) -> None:
        act = action(PRODUCE, code)
        if act is Action.OK:
            for i, pending in enumerate(b.records):
                offset = base_offset + i if code == 0 and base_offset >= 0 else -1
                if not pending.future.done():
                    pending.future.set_result(RecordMetadata(b.topic, b.partition, offset))
            return
        message = getattr(p, "error_message", None) or "Produce"
        if act is Action.REFRESH:
            self.view.forget_leader(b.topic, b.partition)
            self._retry(b, RetriableError(message, code))
            return
        if act is Action.RETRY:
            self._retry(b, RetriableError(message, code))
            return
        # The broker refused the batch: not written; its sequences can be reused.
        b.maybe_written = False
        self._failed(b, exception_for(act, message, code), act)

    def _retry(self, b: Batch, error: KafkaClientError) -> None:
        now = time.monotonic()
        expired = now - b.created > self.config.delivery_timeout_ms / 1000
        if expired or self._doomed() is not None or self._closing:
            act = Action.BUMP if expired else Action.ABORTABLE
            err = self._doomed() or RetriableError(f"delivery timed out ({error})", error.code)
            self._failed(b, err, act)
            return
        b.retry_at = now + self.config.retry_backoff_ms / 1000
        self.retries[(b.topic, b.partition)] = b

    def _failed(self, b: Batch, error: KafkaClientError, act: Action) -> None:
        for pending in b.records:
            _fail(pending.future, error, maybe_written=b.maybe_written)
        if not b.maybe_written and self.state.current == b.ids:
            self.state.rewind_sequence(b.topic, b.partition, b.base_sequence)
        if act is Action.FATAL:
            self.sm.fail(error)
            return
        if self.transactional:
            # Java (TV0/1): every failed batch asks for an epoch bump after the abort.
            self.sm.abortable(_as_abortable(error), bump=True)
        elif act is Action.BUMP or b.maybe_written:
            self.idempotent_bump = True


def _as_abortable(error: KafkaClientError) -> KafkaClientError:
    if isinstance(error, FatalError | AbortableError):
        return error
    return exception_for(Action.ABORTABLE, str(error), error.code or 0)


def _fail(
    fut: asyncio.Future[RecordMetadata], error: KafkaClientError, maybe_written: bool
) -> None:
    if fut.done():
        return
    err = type(error)(str(error), None, maybe_written=maybe_written)
    err.code = error.code
    fut.set_exception(err)
