"""The final phase: a read_committed read of every partition from its start to its end.

Run after faults are healed and the cluster is quiescent.  For each partition the end is the
last stable offset (ListOffsets latest with isolation read_committed; equal to the high
watermark unless a transaction is still open, in which case reading stops at the LSO, as any
read_committed consumer would).  Partitions are read with ``assign()`` (no group management)
and every batch is recorded as a ``final_read`` op of the process ``final-reader``, after a
START and an ASSIGN (items: the log start offsets) and before a STOP.

A partition is done when the consumer's position reaches its end, or when librdkafka reports
partition EOF at or past it (a partition whose tail is an aborted transaction and its marker
delivers nothing, so the position alone would never move there).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ...rundir.final_state import FinalPartition
from ...rundir.schema import EventType, Isolation
from ...rundir.writer import HistoryWriter
from ..client_security import security_config
from .clients import ClientError, ConsumerClient, DirectExecutor, Executor, position
from .config import TopicSpec

FINAL_READER = "final-reader"
#: seconds between two ListOffsets of the final read that got a retriable error
RETRY_S = 0.5
#: the final read's answers that mean "a partition has no leader now", asked again: a
#: partition's LEADER_NOT_AVAILABLE / NOT_LEADER_OR_FOLLOWER (their KafkaError from an admin
#: future does not say retriable), and librdkafka's own _NOENT "No leaders found" when no
#: partition asked has one
LEADERLESS = frozenset(
    {KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._NOENT}
)
#: librdkafka's own log lines (disconnects while nodes are down, ...) go to the harness
#: log, not to the terminal.
CLIENT_LOG = logging.getLogger("txnchaos.librdkafka")


class FinalReadError(RuntimeError):
    pass


@dataclass
class PartitionEnd:
    topic: str
    partition: int
    log_start_offset: int
    lso: int
    high_watermark: int
    #: Where the read ended (position, or EOF offset); None if nothing was read.
    reached: int | None = None
    complete: bool = False


@dataclass
class FinalReadResult:
    partitions: list[PartitionEnd] = field(default_factory=list)
    records: int = 0
    polls: int = 0

    @property
    def complete(self) -> bool:
        return all(p.complete for p in self.partitions)

    def partition_state(self) -> list[FinalPartition]:
        """The ``partitions`` list of ``final_state.json`` (history/final_state.py)."""
        return [
            {
                "topic": p.topic,
                "partition": p.partition,
                "lso": p.lso,
                "high_watermark": p.high_watermark,
                "log_start_offset": p.log_start_offset,
            }
            for p in self.partitions
        ]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def _wait(futures: Mapping[Any, Any], deadline: float) -> dict[Any, Any]:
    """Results of admin futures, polled with done() (works under gevent monkey-patching)."""
    out = {}
    for key, fut in futures.items():
        while not fut.done():
            if time.monotonic() > deadline:
                raise FinalReadError(f"admin request for {key} timed out")
            time.sleep(0.02)
        out[key] = fut.result(0)
    return out


def _partition_counts(
    admin: AdminClient, topics: Iterable[str | TopicSpec] | Mapping[str, int], timeout_s: float
) -> dict[str, int]:
    if isinstance(topics, Mapping):
        return {str(t): int(n) for t, n in topics.items()}
    out: dict[str, int] = {}
    names = []
    for t in topics:
        if isinstance(t, TopicSpec):
            out[t.name] = t.partitions
        else:
            names.append(t)
    if names:
        md = admin.list_topics(timeout=timeout_s)
        for n in names:
            tm = md.topics.get(n)
            if tm is None or tm.error is not None:
                raise FinalReadError(f"topic {n!r} not found in metadata")
            out[n] = len(tm.partitions)
    return out


def list_ends(
    bootstrap: str,
    topics: Iterable[str | TopicSpec] | Mapping[str, int],
    timeout_s: float = 30.0,
    security: Mapping[str, Any] | None = None,
) -> list[PartitionEnd]:
    """Log start, LSO and high watermark of every partition of ``topics`` (``security``:
    the clients' SASL keys, see ``harness.client_security``)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "logger": CLIENT_LOG,
        **(security or {}),
    }
    admin = AdminClient(conf)
    counts = _partition_counts(admin, topics, timeout_s)
    tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
    deadline = time.monotonic() + timeout_s

    def query(spec: OffsetSpec, iso: IsolationLevel) -> dict[tuple[str, int], int]:
        # A retriable error (LEADER_NOT_AVAILABLE while a restarted or fenced broker comes
        # back, NOT_LEADER_OR_FOLLOWER after a move) is asked again until the deadline:
        # Apache Kafka at load 80 left partitions leaderless for a minute after a
        # controller restart, and the run's final read failed at its first answer.
        while True:
            futs = admin.list_offsets(
                {tp: spec for tp in tps}, isolation_level=iso, request_timeout=timeout_s
            )
            try:
                res = _wait(futs, deadline)
            except KafkaException as e:
                error = e.args[0] if e.args else None
                retriable = isinstance(error, KafkaError) and (
                    error.retriable() or error.code() in LEADERLESS
                )
                if not retriable or time.monotonic() + RETRY_S > deadline:
                    raise
                time.sleep(RETRY_S)
                continue
            return {(tp.topic, tp.partition): int(r.offset) for tp, r in res.items()}

    try:
        start = query(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
        lso = query(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        hw = query(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    except KafkaException as e:
        raise FinalReadError(f"ListOffsets failed: {e}") from e
    return [
        PartitionEnd(
            tp.topic,
            tp.partition,
            start[(tp.topic, tp.partition)],
            lso[(tp.topic, tp.partition)],
            hw[(tp.topic, tp.partition)],
        )
        for tp in tps
    ]


def final_read(
    bootstrap: str,
    topics: Iterable[str | TopicSpec] | Mapping[str, int],
    run_dir: str | os.PathLike[str],
    *,
    process: str = FINAL_READER,
    timeout_s: float = 120.0,
    group_id: str = "txnchaos-final-reader",
    client_config: Mapping[str, Any] | None = None,
    executor: Executor | None = None,
    max_records_per_poll: int = 5000,
) -> FinalReadResult:
    """Read every partition of ``topics`` to its LSO, recording FINAL_READ ops.

    Returns what was reached; ``result.complete`` is False if ``timeout_s`` ran out first
    (everything read until then is recorded).
    """
    deadline = time.monotonic() + timeout_s
    ends = list_ends(
        bootstrap, topics, timeout_s=min(timeout_s, 60.0), security=security_config(client_config)
    )
    result = FinalReadResult(partitions=ends)
    conf = {
        "bootstrap.servers": bootstrap,
        "logger": CLIENT_LOG,
        "group.id": group_id,
        "client.id": process,
        "isolation.level": Isolation.READ_COMMITTED.value,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        **(client_config or {}),
    }
    # resume: a repeated final read continues the process's op ids instead of reusing them
    with HistoryWriter.resume(run_dir, process, flush_every=256) as writer:
        writer.record(EventType.START, group_id=group_id)
        client = ConsumerClient(
            conf,
            writer,
            executor=executor or DirectExecutor(),
            request_type="final",
            event_type=EventType.FINAL_READ,
        )
        try:
            todo: dict[tuple[str, int], PartitionEnd] = {}
            for e in ends:
                if e.lso <= e.log_start_offset:
                    e.complete = True
                    e.reached = e.log_start_offset
                else:
                    todo[(e.topic, e.partition)] = e
            client.assign([TopicPartition(e.topic, e.partition, e.log_start_offset) for e in ends])
            while todo and time.monotonic() < deadline:
                try:
                    msgs = client.poll(max_records_per_poll, 0.5)
                except ClientError:
                    time.sleep(0.1)
                    continue
                result.polls += 1
                result.records += len(msgs)
                reached: dict[tuple[str, int], int] = {}
                for m in msgs:
                    topic, partition, offset = position(m)
                    reached[(topic, partition)] = offset + 1
                for t, p, off in client.eof:
                    reached[(t, p)] = max(reached.get((t, p), 0), off)
                for key, off in reached.items():
                    end = todo.get(key)
                    if end is None:
                        continue
                    end.reached = max(end.reached or 0, off)
                    if end.reached >= end.lso:
                        end.complete = True
                        del todo[key]
        finally:
            client.close()
            writer.record(EventType.STOP, group_id=group_id)
    return result
