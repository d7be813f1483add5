"""eos_copier: consume-transform-produce in transactions (confluent-kafka consumer and
producer), the offsets committed with the outputs (KIP-447)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NoReturn

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from pydantic import Field, model_validator

from ....rundir.schema import Outcome, encode_value
from ..clients import (
    ClientError,
    ConsumerClient,
    ProducerReset,
    chance,
    next_offsets,
    position,
)
from ..recording import RecordingProducer
from ..spec import UserSpecBase
from ..workers import FLUSH_TIMEOUT_S, Worker, WorkerContext, hold_forever
from .kind import UserKind


class EOSCopierSpec(UserSpecBase):
    kind: Literal["eos_copier"] = "eos_copier"
    input_topics: Annotated[list[str], Field(min_length=1)]
    output_topic: str
    group_id: Annotated[str | None, Field(min_length=1)] = None
    #: Most input records consumed, copied and committed in one transaction.
    max_records_per_txn: Annotated[int, Field(ge=1, le=100_000)] = 100
    poll_timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 500
    abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.05
    flush_before_abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.5
    transaction_timeout_ms: Annotated[int, Field(ge=1000, le=2_147_483_647)] = 60_000
    transactional_id: Annotated[str, Field(min_length=1)] = "{process}"
    commit_retries: Annotated[int, Field(ge=0, le=100)] = 3
    padding_bytes: Annotated[int, Field(ge=0, le=10_000_000)] = 0

    @model_validator(mode="after")
    def _distinct_topics(self) -> EOSCopierSpec:
        if self.output_topic in self.input_topics:
            raise ValueError(
                f"output_topic {self.output_topic!r} must not be one of input_topics "
                "(a copier reading its own output never settles)"
            )
        return self

    def topic_refs(self) -> list[tuple[str, str]]:
        refs = [("input_topics", t) for t in self.input_topics]
        refs.append(("output_topic", self.output_topic))
        return refs


class EOSCopierWorker(Worker):
    """Consume-transform-produce: poll, copy in a transaction, send offsets, commit.

    KIP-447: offsets go into the transaction with the consumer's group metadata (generation and
    member id), so a copier that lost its partitions in a rebalance is fenced by the group
    coordinator instead of committing offsets for partitions it no longer owns.  Any transaction
    that does not commit rewinds the consumer to the group's committed offsets (SEEK op);
    until a rewind succeeds the copier polls nothing (a consumer left at its position would
    copy on from there, and the inputs of the transaction that did not commit would never
    be copied: missing output).
    """

    request_type = "copier"
    spec: EOSCopierSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.group_id = spec.group_id or f"txnchaos-{ctx.config.process_prefix(spec)}"
        self.transactional_id = spec.transactional_id.format(process=process, index=index)
        self.out_partitions = ctx.config.partitions(spec.output_topic)
        self.next_txn = 0
        self.producer: RecordingProducer | None = None
        self.consumer: ConsumerClient | None = None
        #: a transaction did not commit and the consumer is not back at the committed offsets
        self.rewind_pending = False

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

    def _new_producer(self) -> RecordingProducer:
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

    def rewind(self) -> bool:
        """Seek every assigned partition back to the group's committed offset; whether it
        did (True as well with nothing assigned: an assignment starts from the committed
        offsets)."""
        c = self.consumer
        if c is None or c.consumer is None:
            return True
        try:
            parts = c._run(c.consumer.assignment)
            if not parts:
                return True
            committed = c._run(c.consumer.committed, parts, self.spec.op_timeout_s)
        except Exception:
            return False
        seeks = [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            )
            for tp in committed
        ]
        try:
            c.seek(seeks)
        except Exception:
            return False
        return True

    def _rewound(self) -> bool:
        """Rewind; False (and the rewind left pending) when it failed."""
        self.rewind_pending = not self.rewind()
        return not self.rewind_pending

    def hold(self, point: str, announce: Callable[[str], None]) -> NoReturn:
        """before-commit: a transaction with its copies sent and acknowledged and its offsets
        sent, commit never called; in-poll: announced just before a long poll."""
        p, c = self.producer, self.consumer
        assert p is not None and c is not None
        if point == "in-poll":
            announce("HOLD poll")
            while True:
                c.poll(1000, 30.0)
        if point != "before-commit":
            super().hold(point, announce)
        if not p.initialized:
            p.init(self.spec.op_timeout_s)
        while True:
            msgs = c.poll(self.spec.max_records_per_txn, self.spec.poll_timeout_ms / 1000)
            if msgs:
                break
        txn = self.next_txn
        self.next_txn += 1
        p.begin(txn)
        for i, m in enumerate(msgs):
            value = m.value()
            p.send(
                self.spec.output_topic,
                position(m)[1] % self.out_partitions,
                encode_value(self.process, txn, i),
                txn=txn,
                source=value.decode("utf-8", errors="replace") if value else None,
            )
        p.send_offsets(txn, next_offsets(msgs), c.group_metadata(), self.group_id, 30.0)
        p.flush(FLUSH_TIMEOUT_S)
        announce(f"HOLD txn={txn}")
        hold_forever()

    def step(self) -> None:
        p, c = self.producer, self.consumer
        assert p is not None and c is not None
        if self.rewind_pending and not self._rewound():
            return  # poll nothing from a position past inputs that were never copied
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
            self._rewound()

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
            on_purpose = not p.txn_abortable  # the draw chose it, no error forced it
            if chance(self.rng, self.spec.flush_before_abort_probability):
                p.flush(FLUSH_TIMEOUT_S)
            p.abort(txn, timeout, retries, on_purpose=on_purpose)
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


KIND = UserKind(
    spec=EOSCopierSpec,
    worker=EOSCopierWorker,
    prefix="copier",
    locust_user="EOSCopierUser",
    crash_holds={"crash_consumer": "in-poll"},
)
