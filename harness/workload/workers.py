"""The workload logic, one class per user kind, independent of locust.

A worker owns one process name (its history file and its writer identity in
:func:`~txnchaos.harness.history.schema.encode_value`), its clients and its counters.
``start()`` records START and creates the clients, each ``step()`` is one task (a transaction,
a batch, a poll), ``stop()`` records STOP and closes the clients.  The locust users
(:mod:`.users`) call these from a greenlet with a :class:`~.clients.GeventExecutor`; the
crashable subprocess (:mod:`.crashable`) calls them directly.
"""

from __future__ import annotations

import os
import random
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from ..history.run_dir import HISTORY_DIR
from ..history.schema import EventType, Outcome, encode_value
from ..history.writer import HistoryWriter
from .clients import (
    ClientError,
    ConsumerClient,
    DirectExecutor,
    Executor,
    ProducerClient,
    ProducerReset,
    Reporter,
    chance,
    next_offsets,
)
from .config import (
    EOSCopierSpec,
    IdempotentProducerSpec,
    ReadCommittedConsumerSpec,
    TransactionalProducerSpec,
    WorkloadConfig,
)

#: How long a task waits for outstanding acks before it moves on (seconds).
FLUSH_TIMEOUT_S = 30.0


# -- process names ----------------------------------------------------------------------------


class NameAllocator:
    """Hands out process names ``<prefix>-[<tag>-]<n>`` that are unique in the run directory.

    A name whose history file already exists (an earlier incarnation of this runner in the
    same run directory) is skipped, so ``(process, op_id)`` and ``(process, txn)`` are never
    reused.  Returns the name and ``n`` (the user's index within its prefix).
    """

    def __init__(self, run_dir: str | os.PathLike[str], tag: str = "") -> None:
        self.history = Path(run_dir) / HISTORY_DIR
        self.tag = tag
        self._taken: set[str] = set()
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def allocate(self, prefix: str) -> tuple[str, int]:
        with self._lock:
            n = self._next.get(prefix, 0)
            while True:
                name = f"{prefix}-{self.tag}-{n}" if self.tag else f"{prefix}-{n}"
                if name not in self._taken and not (self.history / f"{name}.jsonl").exists():
                    break
                n += 1
            self._taken.add(name)
            self._next[prefix] = n + 1
            return name, n


# -- context ----------------------------------------------------------------------------------


def _noop_reporter(_rt: str, _n: str, _ms: float, _e: BaseException | None) -> None:
    return None


@dataclass
class WorkerContext:
    """What every worker of a run shares."""

    config: WorkloadConfig
    run_dir: Path
    bootstrap: str
    executor: Executor = field(default_factory=DirectExecutor)
    reporter: Reporter = _noop_reporter
    seed: int | None = None
    #: Lines buffered by the history writer before a flush (1 = every line).
    flush_every: int = 1
    fsync: bool = False
    #: Client constructors (tests substitute fakes).
    producer_factory: Callable[[dict[str, Any]], Any] = Producer
    consumer_factory: Callable[[dict[str, Any]], Any] = Consumer


class Worker(ABC):
    kind: str = ""
    request_type: str = ""

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        self.spec = spec
        self.ctx = ctx
        self.process = process
        self.index = index
        seed = ctx.seed if ctx.seed is not None else random.SystemRandom().getrandbits(32)
        self.rng = random.Random(seed ^ zlib.crc32(process.encode()))
        self.writer = HistoryWriter(
            ctx.run_dir, process, flush_every=ctx.flush_every, fsync=ctx.fsync
        )
        self.started = False
        self.stopped = False

    # -- config helpers ---------------------------------------------------------------------

    def client_conf(self, **base: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.ctx.bootstrap,
            "client.id": self.process,
            **base,
        }
        conf.update(self.ctx.config.client_overrides(self.spec))
        return conf

    def producer_conf(self, transactional_id: str | None = None) -> dict[str, Any]:
        """An idempotent producer's configuration; with ``transactional_id``, a transactional
        one (its timeout from the spec)."""
        txn: dict[str, Any] = {}
        if transactional_id is not None:
            txn = {
                "transactional.id": transactional_id,
                "transaction.timeout.ms": self.spec.transaction_timeout_ms,
            }
        return self.client_conf(
            **{
                **txn,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "statistics.interval.ms": self.ctx.config.statistics_interval_ms,
            }
        )

    def new_producer(self, conf: dict[str, Any], group_id: str | None = None) -> ProducerClient:
        return ProducerClient(
            conf,
            self.writer,
            executor=self.ctx.executor,
            reporter=self.ctx.reporter,
            request_type=self.request_type,
            padding_bytes=self.spec.padding_bytes,
            producer_factory=self.ctx.producer_factory,
            group_id=group_id,
        )

    def start(self) -> None:
        self.writer.record(EventType.START, **self.start_fields())
        self.started = True
        self.open_clients()

    def start_fields(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def open_clients(self) -> None: ...

    @abstractmethod
    def step(self) -> None: ...

    @abstractmethod
    def close_clients(self, abort_open: bool) -> None: ...

    def stop(self, *, abort_open: bool = False) -> None:
        """Clean stop: close clients (open transactions stay open unless ``abort_open``)."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.close_clients(abort_open)
        finally:
            if self.started:
                self.writer.record(EventType.STOP, **self.start_fields())
            self.writer.close()


# -- producers --------------------------------------------------------------------------------


class _ProducerWorker(Worker):
    client: ProducerClient | None

    def partitions(self) -> list[tuple[str, int]]:
        cfg = self.ctx.config
        return [(t, p) for t in self.spec.topics for p in range(cfg.partitions(t))]

    @abstractmethod
    def conf(self) -> dict[str, Any]: ...

    def open_clients(self) -> None:
        self.client = self.new_producer(self.conf())

    def close_clients(self, abort_open: bool) -> None:
        if self.client is not None:
            self.client.close(abort_open=abort_open)
            self.client = None


class TransactionalProducerWorker(_ProducerWorker):
    """Transactions of k records over several partitions, random aborts."""

    kind = "transactional_producer"
    request_type = "txn"
    spec: TransactionalProducerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.transactional_id = spec.transactional_id.format(process=process, index=index)
        self.next_txn = 0
        self.client = None
        self._parts = self.partitions()

    def start_fields(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id}

    def conf(self) -> dict[str, Any]:
        return self.producer_conf(self.transactional_id)

    def reset(self) -> None:
        """Replace an unusable producer; its open transaction is left to be fenced."""
        if self.client is not None:
            self.client.close(abort_open=False)
        self.open_clients()

    def ensure_init(self) -> ProducerClient:
        assert self.client is not None, "worker not started"
        if not self.client.initialized:
            try:
                self.client.init(self.spec.op_timeout_s)
            except ProducerReset:
                self.reset()
                raise
        return self.client

    def step(self) -> None:
        try:
            self.transaction()
        except ProducerReset:
            self.reset()
        except ClientError:
            self._abort_if_open()

    def _abort_if_open(self) -> None:
        c = self.client
        if c is not None and c.open_txn is not None:
            try:
                c.abort(c.open_txn, self.spec.op_timeout_s, self.spec.commit_retries)
            except ProducerReset:
                self.reset()

    def begin(self) -> int:
        c = self.ensure_init()
        txn = self.next_txn
        self.next_txn += 1  # never reused, even if begin fails
        c.begin(txn)
        return txn

    def send_records(self, txn: int) -> None:
        c = self.client
        assert c is not None
        parts = self.rng.sample(self._parts, self.spec.partitions_per_txn)
        for i in range(self.spec.records_per_txn):
            if c.txn_abortable:
                break
            topic, p = parts[i % len(parts)]
            key = str(p) if self.spec.keyed else None
            c.send(topic, p, encode_value(self.process, txn, i), key=key, txn=txn)
        c.poll(0)

    def finish(self, txn: int) -> Outcome:
        c = self.client
        assert c is not None
        timeout, retries = self.spec.op_timeout_s, self.spec.commit_retries
        if c.txn_abortable or chance(self.rng, self.spec.abort_probability):
            if chance(self.rng, self.spec.flush_before_abort_probability):
                c.flush(FLUSH_TIMEOUT_S)
            c.abort(txn, timeout, retries)
            return Outcome.FAIL
        c.flush(FLUSH_TIMEOUT_S)
        if c.txn_abortable:
            c.abort(txn, timeout, retries)
            return Outcome.FAIL
        return c.commit(txn, timeout, retries)

    def transaction(self) -> Outcome:
        txn = self.begin()
        self.send_records(txn)
        return self.finish(txn)


class IdempotentProducerWorker(_ProducerWorker):
    """Batches of non-transactional records (``txn`` = ``-`` in the values)."""

    kind = "idempotent_producer"
    request_type = "idempotent"
    spec: IdempotentProducerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.next_index = 0
        self.client = None
        self._parts = self.partitions()

    def conf(self) -> dict[str, Any]:
        return self.producer_conf()

    def send_batch(self) -> None:
        c = self.client
        assert c is not None
        for _ in range(self.spec.records_per_batch):
            topic, p = self.rng.choice(self._parts)
            key = str(p) if self.spec.keyed else None
            i = self.next_index
            self.next_index += 1
            c.send(topic, p, encode_value(self.process, None, i), key=key)

    def step(self) -> None:
        c = self.client
        assert c is not None
        try:
            self.send_batch()
            c.flush(FLUSH_TIMEOUT_S)
        except ProducerReset:
            self.close_clients(False)
            self.open_clients()
        except ClientError:
            pass
        if c.fatal:
            self.close_clients(False)
            self.open_clients()


# -- consumers --------------------------------------------------------------------------------


class ReadCommittedConsumerWorker(Worker):
    """Polls and records every record returned; subscribe (group) or assign mode."""

    kind = "read_committed_consumer"
    request_type = "consumer"
    spec: ReadCommittedConsumerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.group_id = spec.group_id or f"txnchaos-{ctx.config.process_prefix(spec)}"
        self.client: ConsumerClient | None = None
        self._pending: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._nonempty_polls = 0

    def start_fields(self) -> dict[str, Any]:
        return {"group_id": self.group_id}

    def conf(self) -> dict[str, Any]:
        return self.client_conf(
            **{
                "group.id": self.group_id,
                "isolation.level": self.spec.isolation,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )

    def _dropped(self, parts: list[TopicPartition]) -> None:
        with self._lock:
            for tp in parts:
                self._pending.pop((tp.topic, tp.partition), None)

    def open_clients(self) -> None:
        self.client = ConsumerClient(
            self.conf(),
            self.writer,
            executor=self.ctx.executor,
            reporter=self.ctx.reporter,
            request_type=self.request_type,
            consumer_factory=self.ctx.consumer_factory,
        )
        self.client.on_revoked = self._dropped
        if self.spec.mode == "subscribe":
            self.client.subscribe(list(self.spec.topics))
        else:
            self.client.assign(self.start_positions())

    def start_positions(self) -> list[TopicPartition]:
        """assign mode: every partition from its log start offset (recorded in ASSIGN)."""
        c = self.client
        assert c is not None
        parts = []
        for t in self.spec.topics:
            for p in range(self.ctx.config.partitions(t)):
                try:
                    low, _ = c.watermarks(t, p, self.spec.op_timeout_s)
                except ClientError:
                    low = OFFSET_BEGINNING
                parts.append(TopicPartition(t, p, low))
        return parts

    def step(self) -> None:
        c = self.client
        assert c is not None
        try:
            msgs = c.poll(self.spec.max_records_per_poll, self.spec.poll_timeout_ms / 1000)
        except ClientError:
            return
        if not msgs or self.spec.mode != "subscribe" or not self.spec.commit_every_polls:
            return
        with self._lock:
            for tp in next_offsets(msgs):
                self._pending[(tp.topic, tp.partition)] = tp.offset
        self._nonempty_polls += 1
        if self._nonempty_polls % self.spec.commit_every_polls == 0:
            self.commit_pending()

    def commit_pending(self) -> None:
        c = self.client
        with self._lock:
            offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(self._pending.items())]
            self._pending.clear()
        if offsets and c is not None:
            c.commit(offsets)

    def close_clients(self, abort_open: bool) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class EOSCopierWorker(Worker):
    """Consume-transform-produce: poll, copy in a transaction, send offsets, commit.

    KIP-447: offsets go into the transaction with the consumer's group metadata (generation and
    member id), so a copier that lost its partitions in a rebalance is fenced by the group
    coordinator instead of committing offsets for partitions it no longer owns.  Any transaction
    that does not commit rewinds the consumer to the group's committed offsets (SEEK op).
    """

    kind = "eos_copier"
    request_type = "copier"
    spec: EOSCopierSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.group_id = spec.group_id or f"txnchaos-{ctx.config.process_prefix(spec)}"
        self.transactional_id = spec.transactional_id.format(process=process, index=index)
        self.out_partitions = ctx.config.partitions(spec.output_topic)
        self.next_txn = 0
        self.producer: ProducerClient | None = None
        self.consumer: ConsumerClient | None = None

    def start_fields(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id, "group_id": self.group_id}

    def consumer_conf(self) -> dict[str, Any]:
        return self.client_conf(
            **{
                "group.id": self.group_id,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )

    def _new_producer(self) -> ProducerClient:
        return self.new_producer(self.producer_conf(self.transactional_id), group_id=self.group_id)

    def open_clients(self) -> None:
        self.producer = self._new_producer()
        self.consumer = ConsumerClient(
            self.consumer_conf(),
            self.writer,
            executor=self.ctx.executor,
            reporter=self.ctx.reporter,
            request_type=self.request_type,
            consumer_factory=self.ctx.consumer_factory,
        )
        self.consumer.subscribe(list(self.spec.input_topics))

    def reset_producer(self) -> None:
        if self.producer is not None:
            self.producer.close(abort_open=False)
        self.producer = self._new_producer()

    def rewind(self) -> None:
        """Seek every assigned partition back to the group's committed offset."""
        c = self.consumer
        if c is None or c.consumer is None:
            return
        try:
            parts = c._run(c.consumer.assignment)
            if not parts:
                return
            committed = c._run(c.consumer.committed, parts, self.spec.op_timeout_s)
        except Exception:  # a failed rewind is retried after the next error
            return
        seeks = [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            )
            for tp in committed
        ]
        try:
            c.seek(seeks)
        except Exception:
            return

    def step(self) -> None:
        p, c = self.producer, self.consumer
        assert p is not None and c is not None
        try:
            if not p.initialized:
                p.init(self.spec.op_timeout_s)
            msgs = c.poll(self.spec.max_records_per_txn, self.spec.poll_timeout_ms / 1000)
        except ProducerReset:
            self.reset_producer()
            return
        except ClientError:
            return
        if not msgs:
            return
        try:
            committed = self.copy(msgs)
        except ProducerReset:
            self.reset_producer()
            committed = False
        except ClientError:
            committed = False
            if p.open_txn is not None:
                try:
                    p.abort(p.open_txn, self.spec.op_timeout_s, self.spec.commit_retries)
                except ProducerReset:
                    self.reset_producer()
        if not committed:
            self.rewind()

    def copy(self, msgs: list[Any]) -> bool:
        p, c = self.producer, self.consumer
        assert p is not None and c is not None
        timeout, retries = self.spec.op_timeout_s, self.spec.commit_retries
        txn = self.next_txn
        self.next_txn += 1
        p.begin(txn)
        for i, m in enumerate(msgs):
            if p.txn_abortable:
                break
            src = m.value().decode("utf-8", errors="replace") if m.value() is not None else None
            key = m.key().decode("utf-8", errors="replace") if m.key() is not None else None
            p.send(
                self.spec.output_topic,
                m.partition() % self.out_partitions,
                encode_value(self.process, txn, i),
                key=key,
                txn=txn,
                source=src,
            )
        if not p.txn_abortable:
            p.send_offsets(txn, next_offsets(msgs), c.group_metadata(), self.group_id, timeout)
        if p.txn_abortable or chance(self.rng, self.spec.abort_probability):
            if chance(self.rng, self.spec.flush_before_abort_probability):
                p.flush(FLUSH_TIMEOUT_S)
            p.abort(txn, timeout, retries)
            return False
        p.flush(FLUSH_TIMEOUT_S)
        if p.txn_abortable:
            p.abort(txn, timeout, retries)
            return False
        return p.commit(txn, timeout, retries) == Outcome.OK

    def close_clients(self, abort_open: bool) -> None:
        if self.producer is not None:
            self.producer.close(abort_open=abort_open)
            self.producer = None
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


# -- our own producer (harness/clients) -------------------------------------------------------


def _our_producer(worker: Worker, transactional_id: str, group_id: str | None) -> Any:
    """An :class:`~.ours.OurProducerClient` with the worker's settings (imported here: the
    confluent-only workers do not need it)."""
    from .ours import OurProducerClient, our_config

    return OurProducerClient(
        our_config(worker.producer_conf(transactional_id), worker.spec.transaction_version),
        worker.writer,
        reporter=worker.ctx.reporter,
        request_type=worker.request_type,
        padding_bytes=worker.spec.padding_bytes,
        group_id=group_id,
    )


class Tv2ProducerWorker(TransactionalProducerWorker):
    """``transactional_producer`` on our own client: TV2 where the cluster offers it."""

    kind = "tv2_producer"
    request_type = "tv2"

    def open_clients(self) -> None:
        self.client = _our_producer(self, self.transactional_id, None)


class Tv2CopierWorker(EOSCopierWorker):
    """``eos_copier`` whose producer is our own client (TxnOffsetCommit v5 under TV2)."""

    kind = "tv2_copier"
    request_type = "tv2-copier"

    def _new_producer(self) -> ProducerClient:
        return _our_producer(self, self.transactional_id, self.group_id)


WORKERS: dict[str, type[Worker]] = {
    w.kind: w
    for w in (
        TransactionalProducerWorker,
        IdempotentProducerWorker,
        ReadCommittedConsumerWorker,
        EOSCopierWorker,
        Tv2ProducerWorker,
        Tv2CopierWorker,
    )
}


def make_worker(spec: Any, ctx: WorkerContext, names: NameAllocator) -> Worker:
    process, index = names.allocate(ctx.config.process_prefix(spec))
    return WORKERS[spec.kind](spec, ctx, process, index)
