"""A recording consumer on the official Java client (a KafkaConsumer in a :class:`JavaProcess`).

:class:`JavaConsumerClient` has the methods of :class:`~..clients.ConsumerClient` that the
consumer and copier workers call, and records the same ops (POLL with the records returned in
order, ASSIGN, REVOKE, SEEK, COMMIT_OFFSETS), so the workers drive it unchanged and the checkers
read the same shapes. Polled records come back as :class:`JavaRecord`, which answers the
accessors of a confluent-kafka ``Message`` those workers use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from ....rundir.schema import EventType, Outcome
from ....rundir.writer import HistoryWriter
from ..recording import ClientError, ErrorClass, EventQueue, Reporter, ms_since, no_report
from .lines import Field
from .process import JavaCallError, JavaProcess, JavaProcessError
from .producer import CALL_MARGIN_S, failure_of

#: The log start, as the Java side and confluent-kafka both spell it.
OFFSET_BEGINNING = -2


@dataclass(frozen=True)
class JavaRecord:
    """One polled record, with the accessors of a confluent-kafka ``Message``."""

    _topic: str
    _partition: int
    _offset: int
    _key: str | None
    _value: str | None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return None if self._key is None else self._key.encode()

    def value(self) -> bytes | None:
        return None if self._value is None else self._value.encode()

    def error(self) -> None:
        return None


@dataclass(frozen=True)
class GroupName:
    """What ``group_metadata()`` gives: the Java producer takes the real metadata (generation,
    member id) from the consumer in its own process."""

    group_id: str

    def __str__(self) -> str:
        return self.group_id


def _positions(parts: list[TopicPartition]) -> list[Field]:
    out: list[Field] = []
    for tp in parts:
        out += [tp.topic, tp.partition, tp.offset]
    return out


def _items(parts: list[Any], with_offset: bool = True) -> list[dict[str, Any]]:
    out = []
    for topic, partition, *rest in parts:
        item: dict[str, Any] = {"topic": topic, "partition": partition}
        if with_offset and rest and rest[0] >= 0:
            item["offset"] = rest[0]
        out.append(item)
    return out


class JavaConsumerClient:
    """A KafkaConsumer in ``process`` that records polls, assignments, seeks and commits."""

    def __init__(
        self,
        process: JavaProcess,
        props: Mapping[str, str],
        writer: HistoryWriter,
        *,
        call_timeout_s: float,
        reporter: Reporter | None = None,
        request_type: str = "java-consumer",
    ) -> None:
        self.process = process
        self.writer = writer
        self.call_timeout_s = call_timeout_s
        self.events = EventQueue(reporter or no_report)
        self.request_type = request_type
        self.group_id: str | None = props.get("group.id")
        self.isolation = props.get("isolation.level", "read_committed")
        #: Called after a revoke (or a loss) is recorded, e.g. to drop pending offsets.
        self.on_revoked: Callable[[list[TopicPartition]], None] | None = None
        process.on_event = self._on_event
        self._call("consumer", *(f"{k}={v}" for k, v in props.items()))
        self.open = True

    def _call(self, name: str, *fields: Field, timeout_s: float | None = None) -> dict[str, Any]:
        wait = (timeout_s if timeout_s is not None else self.call_timeout_s) + CALL_MARGIN_S
        try:
            return self.process.request(name, *fields, timeout_s=wait)
        finally:
            self.events.drain()

    def _fields(self) -> dict[str, Any]:
        return {"group_id": self.group_id}

    def _on_event(self, msg: dict[str, Any]) -> None:
        parts = msg["parts"]
        if msg["event"] == "assigned":
            self.writer.record(EventType.ASSIGN, items=_items(parts), **self._fields())
            self.events.put(self.request_type, "assign", 0.0, None)
            return
        lost = msg["event"] == "lost"
        self.writer.record(
            EventType.REVOKE,
            Outcome.INFO if lost else Outcome.OK,
            items=_items(parts, with_offset=False),
            error="partitions lost" if lost else None,
            **self._fields(),
        )
        if not lost:
            self.events.put(self.request_type, "revoke", 0.0, None)
        if self.on_revoked:
            self.on_revoked([TopicPartition(t, p) for t, p in parts])

    # -- API ----------------------------------------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        self._call("subscribe", *topics)

    def assign(self, parts: list[TopicPartition]) -> None:
        """Explicit assignment (ASSIGN op with the starting offsets)."""
        self._call("assign", *_positions(parts))
        self.writer.record(
            EventType.ASSIGN,
            items=_items([(tp.topic, tp.partition, tp.offset) for tp in parts]),
            **self._fields(),
        )

    def seek(self, parts: list[TopicPartition]) -> None:
        self._call("seek", *_positions(parts))
        self.writer.record(
            EventType.SEEK,
            items=_items([(tp.topic, tp.partition, tp.offset) for tp in parts]),
            **self._fields(),
        )

    def rewind(self, timeout_s: float) -> bool:
        """Seek every assigned partition back to the group's committed offset (SEEK op);
        whether it did (a failed rewind is tried again before the next poll)."""
        try:
            answer = self._call("rewind", int(timeout_s * 1000), timeout_s=timeout_s)
        except (JavaCallError, JavaProcessError):
            return False
        if answer["parts"]:
            self.writer.record(EventType.SEEK, items=_items(answer["parts"]), **self._fields())
        return True

    def watermarks(self, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
        try:
            answer = self._call(
                "watermarks", topic, partition, int(timeout_s * 1000), timeout_s=timeout_s
            )
        except (JavaCallError, JavaProcessError) as e:
            failure = failure_of(e)
            assert failure is not None
            raise ClientError(f"watermarks {topic}/{partition}", failure, e) from e
        return int(answer["low"]), int(answer["high"])

    def poll(self, max_records: int, timeout_s: float) -> list[JavaRecord]:
        """poll() (one POLL op with the records returned, in order). ``max_records`` is the
        consumer's max.poll.records, set when it was created."""
        invoke_ns = time.time_ns()
        try:
            answer = self._call("poll", int(timeout_s * 1000), timeout_s=timeout_s)
        except (JavaCallError, JavaProcessError) as e:
            failure = failure_of(e)
            assert failure is not None
            self.writer.record(
                EventType.POLL,
                Outcome.FAIL,
                invoke_ns=invoke_ns,
                error=failure.text,
                isolation=self.isolation,
                **self._fields(),
            )
            self.events.put(self.request_type, "poll", ms_since(invoke_ns), e)
            self.events.drain()
            raise ClientError("poll", failure, e) from e
        records = [JavaRecord(*r) for r in answer["records"]]
        items = [
            {
                "topic": r.topic(),
                "partition": r.partition(),
                "offset": r.offset(),
                "value": r._value,
                "key": r._key,
            }
            for r in records
        ]
        self.writer.record(
            EventType.POLL,
            Outcome.OK,
            invoke_ns=invoke_ns,
            items=items,
            isolation=self.isolation,
            **self._fields(),
        )
        self.events.put(self.request_type, "poll", ms_since(invoke_ns), None)
        self.events.drain()
        return records

    def commit(self, offsets: list[TopicPartition]) -> Outcome:
        """commitSync (COMMIT_OFFSETS op): info when the error is retriable, else fail."""
        items = _items([(tp.topic, tp.partition, tp.offset) for tp in offsets])
        op = self.writer.invoke(EventType.COMMIT_OFFSETS, items=items, **self._fields())
        try:
            self._call("commit_offsets", *_positions(offsets))
        except (JavaCallError, JavaProcessError) as e:
            failure = failure_of(e)
            assert failure is not None
            # A timeout, or a JVM that died during the call: the commit may have happened.
            unknown = failure.error_class == ErrorClass.RETRIABLE or isinstance(e, JavaProcessError)
            outcome = Outcome.INFO if unknown else Outcome.FAIL
            self.writer.complete(op, outcome, error=failure.text)
            self.events.put(self.request_type, "commit", ms_since(op.invoke_ns), e)
            self.events.drain()
            return outcome
        self.writer.complete(op, Outcome.OK)
        self.events.put(self.request_type, "commit", ms_since(op.invoke_ns), None)
        self.events.drain()
        return Outcome.OK

    def group_metadata(self) -> GroupName:
        return GroupName(self.group_id or "")

    def close(self, timeout_s: float = 10.0) -> None:
        if not self.open:
            return
        self.open = False
        try:
            if self.process.alive:
                self._call("close_consumer", int(timeout_s * 1000), timeout_s=timeout_s)
        except (JavaCallError, JavaProcessError):
            pass
        finally:
            self.events.drain()
