"""read_committed_consumer: polls and records every record returned (a confluent-kafka
consumer, in a group or on an explicit assignment)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, NoReturn

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from pydantic import Field

from ..clients import ClientError, ConsumerClient, next_offsets
from ..spec import UserSpecBase
from ..workers import Worker, WorkerContext
from .kind import UserKind


class ReadCommittedConsumerSpec(UserSpecBase):
    kind: Literal["read_committed_consumer"] = "read_committed_consumer"
    topics: Annotated[list[str], Field(min_length=1)]
    #: subscribe: group membership with rebalances; assign: every partition of ``topics``,
    #: from the log start, no group management.
    mode: Literal["subscribe", "assign"] = "subscribe"
    #: Consumer group (default ``txnchaos-<name>``; assign mode still needs one for librdkafka).
    group_id: Annotated[str | None, Field(min_length=1)] = None
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    max_records_per_poll: Annotated[int, Field(ge=1, le=100_000)] = 500
    poll_timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 500
    #: subscribe mode: commit the consumed positions every N non-empty polls (0 = never).
    commit_every_polls: Annotated[int, Field(ge=0)] = 1

    def topic_refs(self) -> list[tuple[str, str]]:
        return [("topics", t) for t in self.topics]


class ReadCommittedConsumerWorker(Worker):
    """Polls and records every record returned; subscribe (group) or assign mode."""

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

    def hold(self, point: str, announce: Callable[[str], None]) -> NoReturn:
        """in-poll: announced just before a long poll, so the kill lands inside it."""
        if point != "in-poll":
            super().hold(point, announce)
        c = self.client
        assert c is not None
        announce("HOLD poll")
        while True:
            c.poll(1000, 30.0)

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


KIND = UserKind(
    spec=ReadCommittedConsumerSpec,
    worker=ReadCommittedConsumerWorker,
    prefix="consumer",
    locust_user="ReadCommittedConsumerUser",
    crash_holds={"crash_consumer": "in-poll"},
)
