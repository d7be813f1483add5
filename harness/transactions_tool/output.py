"""The verbs' output: tables with the columns of KIP-664's ``kafka-transactions.sh``, or
JSON (``--json``) with every field, for scripts."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

from .admin import ProducerState, TransactionDescription, TransactionListing
from .verbs import OpenTransaction

LIST_COLUMNS = ("TransactionalId", "ProducerId", "Coordinator", "State")
DESCRIBE_COLUMNS = (
    "ProducerId",
    "ProducerEpoch",
    "Coordinator",
    "State",
    "TimeoutMs",
    "TopicPartitions",
)
PRODUCERS_COLUMNS = (
    "ProducerId",
    "ProducerEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(s)",
    "CoordinatorEpoch",
)
HANGING_COLUMNS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(s)",
)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns, two spaces apart, a header line first."""
    cells = [list(columns)] + [[str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def iso(ms: int) -> str:
    if ms < 0:
        return "None"
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(now_ms: int, since_ms: int) -> str:
    return "None" if since_ms < 0 else str(max(now_ms - since_ms, 0) // 1000)


def _offset(offset: int | None) -> str:
    return "None" if offset is None else str(offset)


def listing(items: list[TransactionListing], as_json: bool) -> str:
    if as_json:
        return json.dumps(
            [
                {
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "coordinator": t.coordinator,
                    "state": t.state,
                }
                for t in items
            ],
            indent=1,
        )
    rows = [(t.transactional_id, t.producer_id, t.coordinator, t.state) for t in items]
    return table(LIST_COLUMNS, rows)


def description(d: TransactionDescription, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            {
                "transactional_id": d.transactional_id,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "coordinator": d.coordinator,
                "state": d.state,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_time_ms,
                "topic_partitions": [{"topic": t, "partition": p} for t, p in d.partitions],
            },
            indent=1,
        )
    partitions = ",".join(f"{t}-{p}" for t, p in d.partitions)
    row = (d.producer_id, d.producer_epoch, d.coordinator, d.state, d.timeout_ms, partitions)
    return table(DESCRIBE_COLUMNS, [row])


def _producer_json(p: ProducerState, now_ms: int) -> dict[str, Any]:
    return {
        "producer_id": p.producer_id,
        "producer_epoch": p.producer_epoch,
        "start_offset": p.start_offset,
        "last_sequence": p.last_sequence,
        "last_timestamp": p.last_timestamp,
        "duration_s": None if p.last_timestamp < 0 else max(now_ms - p.last_timestamp, 0) // 1000,
        "coordinator_epoch": p.coordinator_epoch,
    }


def producers(items: list[ProducerState], now_ms: int, as_json: bool) -> str:
    if as_json:
        return json.dumps([_producer_json(p, now_ms) for p in items], indent=1)
    rows = [
        (
            p.producer_id,
            p.producer_epoch,
            _offset(p.start_offset),
            iso(p.last_timestamp),
            _seconds(now_ms, p.last_timestamp),
            p.coordinator_epoch,
        )
        for p in items
    ]
    return table(PRODUCERS_COLUMNS, rows)


def hanging(items: list[OpenTransaction], now_ms: int, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            [
                {"topic": h.topic, "partition": h.partition, **_producer_json(h.producer, now_ms)}
                for h in items
            ],
            indent=1,
        )
    rows = [
        (
            h.topic,
            h.partition,
            h.producer.producer_id,
            h.producer.producer_epoch,
            _offset(h.producer.start_offset),
            iso(h.producer.last_timestamp),
            _seconds(now_ms, h.producer.last_timestamp),
        )
        for h in items
    ]
    return table(HANGING_COLUMNS, rows)
