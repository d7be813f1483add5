"""The newest versions of the APIs a transactional client uses, request by request: Produce
v13 and Fetch v17/v18 name topics by id (KIP-516), ListOffsets v8-v11 add tiered storage's
targets (-4 earliest local, -5 latest tiered, -6 earliest pending upload) and a timeout,
AddOffsetsToTxn v4 knows TRANSACTION_ABORTABLE (KIP-890). Without tiered storage a broker
answers the tiered targets from its local log."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ....cluster.protocol.record_batch import CorruptBatch, check_length, parse_header
from ...clients.batch import Record, encode_batch
from ..catalogue import Outcome, probe
from ..context import (
    FETCH,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    READ_COMMITTED,
    ProbeContext,
    Txn,
)

#: an id no topic has (the same on both clusters)
UNKNOWN_ID = uuid.UUID("00000000-0000-4000-8000-00000000c0de")
#: ListOffsets' targets: latest, earliest, max timestamp, earliest local (KIP-405), latest
#: tiered (KIP-1005), earliest pending upload (KIP-1023)
TARGETS = {"latest": -1, "earliest": -2, "max": -3, "local": -4, "tiered": -5, "pending": -6}
#: the first ListOffsets version that may ask for each target
TARGET_SINCE = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9, -6: 11}


def topic_id(ctx: ProbeContext, topic: str) -> uuid.UUID:
    r = ctx.send(METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    return uuid.UUID(str(r.topics[0].topic_id))


def produce_by_id(
    ctx: ProbeContext, x: Txn, tid: uuid.UUID, topic: str, count: int = 1
) -> dict[str, Any]:
    """A transactional Produce v13 naming the topic by id (TV2: the broker adds the
    partition): the error, the base offset, and whether the answer names the same id."""
    seq = x.next_sequence(topic, 0, count)
    now = int(time.time() * 1000)
    batch = encode_batch(
        [Record(None, f"v{i}".encode(), (), now) for i in range(count)],
        producer_id=x.producer_id,
        producer_epoch=x.epoch,
        base_sequence=seq,
        transactional=True,
    )

    def call() -> Any:
        return ctx.send(
            PRODUCE,
            13,
            transactional_id=x.tid,
            acks=-1,
            timeout=10000,
            topic_data=[{"topic_id": tid, "partition_data": [{"index": 0, "records": batch}]}],
        )

    r = ctx.retry(
        call, lambda r: ctx.err(r.responses[0].partition_responses[0].error_code), "Produce v13"
    )
    topic_answer = r.responses[0]
    part = topic_answer.partition_responses[0]
    error = ctx.err(part.error_code)
    if error != "NONE":
        x.sequences[(topic, 0)] = seq
    return {
        "error": error,
        "offset": int(part.base_offset) if error == "NONE" else None,
        "same_id": uuid.UUID(str(topic_answer.topic_id)) == tid,
    }


def fetch_by_id(ctx: ProbeContext, version: int, tid: uuid.UUID) -> dict[str, Any]:
    """A read_committed Fetch (v13+) of partition 0 by topic id: error, offsets, aborted
    transactions and batch kinds (no retry: an unknown id is an answer)."""
    r = ctx.send(
        FETCH,
        version,
        replica_state={"replica_id": -1, "replica_epoch": -1},
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=READ_COMMITTED,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    answer = r.responses[0]
    part = answer.partitions[0]
    aborted = part.aborted_transactions
    return {
        "error": ctx.err(part.error_code),
        "same_id": uuid.UUID(str(answer.topic_id)) == tid,
        "high_watermark": int(part.high_watermark),
        "lso": int(part.last_stable_offset),
        "aborted": None if aborted is None else len(aborted),
        "batches": _kinds(ctx, bytes(part.records or b"")),
    }


def _kinds(ctx: ProbeContext, data: bytes) -> list[list[Any]]:
    out: list[list[Any]] = []
    pos = 0
    while pos < len(data):
        try:
            h = parse_header(data, pos)
            check_length(h, pos, len(data))
        except CorruptBatch:
            break
        out.append([h.base_offset, "control" if h.is_control else "data", h.records_count])
        pos += h.size
    return out


@probe("versions.produce-fetch-by-topic-id", tags=("ApiVersions", "KIP-890"), configs=("tv2",))
def produce_fetch_by_topic_id(ctx: ProbeContext) -> Outcome:
    """Produce v13 names the topic by id (a TV2 transaction: the broker adds the
    partition), Fetch v16-v18 read it back by id; an unknown id is UNKNOWN_TOPIC_ID on
    both, the answers name the id asked for."""
    topic, x = ctx.topic(), ctx.txn()
    tid = topic_id(ctx, topic)
    out: Outcome = {"first": produce_by_id(ctx, x, tid, topic, count=2)}
    out["second"] = produce_by_id(ctx, x, tid, topic)
    out["end"] = ctx.end(x, True, version=5)
    ctx.stable(topic)
    aborted = ctx.txn()
    out["aborted"] = produce_by_id(ctx, aborted, tid, topic)
    ctx.end(aborted, False, version=5)
    ctx.stable(topic)
    out["unknown"] = produce_by_id(ctx, ctx.txn(), UNKNOWN_ID, topic)
    for version in (16, 17, 18):
        out[f"fetch_v{version}"] = fetch_by_id(ctx, version, tid)
    out["fetch_unknown"] = fetch_by_id(ctx, 18, UNKNOWN_ID)
    return out


def list_offset(ctx: ProbeContext, topic: str, version: int, target: int) -> list[Any]:
    """[error, offset, timestamp, leader epoch] of partition 0 for ``target`` at ``version``."""
    fields: dict[str, Any] = {
        "replica_id": -1,
        "isolation_level": READ_COMMITTED,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": target}
                ],
            }
        ],
    }
    if version >= 10:
        fields["timeout"] = 10_000
    r = ctx.retry(
        lambda: ctx.send(LIST_OFFSETS, version, **fields),
        lambda r: ctx.err(r.topics[0].partitions[0].error_code),
        "ListOffsets",
    )
    p = r.topics[0].partitions[0]
    offset = int(p.offset)
    timestamp = int(p.timestamp)
    return [
        ctx.err(p.error_code),
        offset,
        "set" if timestamp >= 0 else timestamp,
        int(p.leader_epoch),
    ]


@probe("versions.list-offsets-targets", tags=("ApiVersions", "LSO"), configs=("tv2",))
def list_offsets_targets(ctx: ProbeContext) -> Outcome:
    """ListOffsets v7-v11, every target from the version that introduced it, on a partition
    whose log start DeleteRecords moved and whose last transaction is open: -4 (earliest
    local) is the log start without tiered storage, -5 and -6 are -1 (no tiered storage);
    a target one version too early, or one no version knows (-7), is refused."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.transaction(x, topic, True, count=3)
    ctx.transaction(x, topic, True, count=2)
    ctx.delete_records(topic, 0, 2)
    ctx.produce(x, topic, count=1, version=12)  # left open: read_committed stops at it
    out: Outcome = {}
    for version in range(7, 12):
        out[f"v{version}"] = {
            name: list_offset(ctx, topic, version, target)
            for name, target in TARGETS.items()
            if TARGET_SINCE[target] <= version
        }
    out["too_early"] = {
        name: list_offset(ctx, topic, TARGET_SINCE[target] - 1, target)
        for name, target in TARGETS.items()
        if TARGET_SINCE[target] > 1
    }
    out["unknown_target"] = list_offset(ctx, topic, 11, -7)
    ctx.end(x, False, version=5)
    return out


@probe("versions.add-offsets-v4", tags=("ApiVersions", "KIP-890"), configs=("tv2", "tv0"))
def add_offsets_v4(ctx: ProbeContext) -> Outcome:
    """AddOffsetsToTxn v4 (an old client's transaction, TRANSACTION_ABORTABLE known): with
    the producer's epoch, with a stale one, with an unknown producer id, and after the
    transaction ended."""
    topic, first = ctx.topic(), ctx.txn()
    x = ctx.txn(str(first.tid))  # epoch 1, so that epoch 0 is a stale one
    group = ctx.name("g")
    out: Outcome = {"add": ctx.add_partitions_error(x, topic)}
    out["v4"] = ctx.add_offsets(x, group, version=4)
    out["v3"] = ctx.add_offsets(x, group, version=3)
    current = x.epoch
    x.epoch = current - 1
    out["stale"] = ctx.add_offsets(x, group, version=4)
    x.epoch = current
    real = x.producer_id
    x.producer_id = real + 1000
    out["other_id"] = ctx.add_offsets(x, group, version=4)
    x.producer_id = real
    out["end"] = ctx.end(x, False, version=4)
    return out
