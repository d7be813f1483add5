"""API names and the transactional targets (transactional ids, producer ids) of requests.

Names follow Kafka's message names (``Produce``, ``InitProducerId``, ...); lookups
also accept kio's snake_case (``init_producer_id``) and are case-insensitive.

:func:`request_targets` is the only place the proxy decodes a request body, and it
runs only for frames that some active rule wants to match by transactional id or
producer id. Bodies are decoded with the project's kio codec; record batches are
left as bytes and the producer id is read from the v2 batch header at its fixed
offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache

from kio.schema.index import api_key_map

from txnchaos.cluster.protocol.codec import ProtocolError, decode_request

PRODUCE = 0
METADATA = 3
FIND_COORDINATOR = 10
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_CLUSTER = 60

TARGET_APIS = frozenset(
    {
        PRODUCE,
        FIND_COORDINATOR,
        INIT_PRODUCER_ID,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        WRITE_TXN_MARKERS,
        TXN_OFFSET_COMMIT,
    }
)
"""APIs whose requests carry a transactional id and/or a producer id."""

_BATCH_MAGIC_AT = 16
_BATCH_PID_AT = 43
_I64 = struct.Struct(">q")


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


@cache
def api_name(api_key: int) -> str:
    """Kafka's name for an API key (``Produce``), or ``api-<n>`` when unknown."""
    snake = api_key_map.get(api_key)
    return _camel(snake) if snake else f"api-{api_key}"


@cache
def _name_index() -> dict[str, int]:
    index: dict[str, int] = {}
    for key, snake in api_key_map.items():
        index[snake.lower()] = key
        index[snake.replace("_", "").lower()] = key
    return index


def api_key_of(name: str | int) -> int:
    """Resolve an API given by number, Kafka name or kio snake_case name."""
    if isinstance(name, int):
        return name
    text = name.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    key = _name_index().get(text.replace("_", "").lower())
    if key is None:
        raise ValueError(f"unknown Kafka API {name!r}")
    return key


@dataclass(frozen=True, slots=True)
class Targets:
    """Transactional ids and producer ids a request carries (empty when none/unknown)."""

    transactional_ids: tuple[str, ...] = ()
    producer_ids: tuple[int, ...] = ()


NO_TARGETS = Targets()


def _batch_producer_id(records: bytes | None) -> int | None:
    if not records or len(records) < _BATCH_PID_AT + 8 or records[_BATCH_MAGIC_AT] != 2:
        return None
    return _I64.unpack_from(records, _BATCH_PID_AT)[0]


def request_targets(api_key: int, frame: bytes | memoryview) -> Targets:
    """Targets of one request frame (``frame`` includes the 4-byte size prefix).

    Frames that do not decode (unknown versions, garbage) yield no targets; they are
    still forwarded untouched by the caller.
    """
    if api_key not in TARGET_APIS:
        return NO_TARGETS
    try:
        _, body = decode_request(bytes(frame[4:]))
    except ProtocolError:
        return NO_TARGETS
    txn: list[str] = []
    pids: list[int] = []
    if api_key == PRODUCE:
        if body.transactional_id:
            txn.append(body.transactional_id)
        for topic in body.topic_data:
            for part in topic.partition_data:
                pid = _batch_producer_id(part.records)
                if pid is not None and pid not in pids:
                    pids.append(pid)
    elif api_key == FIND_COORDINATOR:
        if getattr(body, "key_type", 0) == 1:
            keys = getattr(body, "coordinator_keys", None)
            txn.extend(keys if keys is not None else [body.key])
    elif api_key == ADD_PARTITIONS_TO_TXN:
        if hasattr(body, "transactions"):  # v4+: batched, one entry per transaction
            for t in body.transactions:
                txn.append(t.transactional_id)
                pids.append(int(t.producer_id))
        else:  # v0-3
            txn.append(body.v3_and_below_transactional_id)
            pids.append(int(body.v3_and_below_producer_id))
    elif api_key == WRITE_TXN_MARKERS:
        pids.extend(int(m.producer_id) for m in body.markers)
    else:  # InitProducerId, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
        tid = getattr(body, "transactional_id", None)
        if tid:
            txn.append(tid)
        pid = getattr(body, "producer_id", None)
        if pid is not None and int(pid) >= 0:
            pids.append(int(pid))
    return Targets(tuple(txn), tuple(pids))


def _skip_string16(frame: bytes | memoryview, pos: int) -> int:
    (length,) = struct.unpack_from(">h", frame, pos)
    return pos + 2 + max(length, 0)


def _uvarint(frame: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = frame[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def produce_acks(frame: bytes | memoryview, api_version: int) -> int:
    """The ``acks`` of a Produce request frame (size prefix included), without decoding.

    Produce with acks=0 gets no response, which the proxy must know to keep the
    response order of a connection. Returns -1 (all) when the frame is too short.
    """
    try:
        pos = _skip_string16(frame, 12)  # size, api key, version, correlation id, client_id
        flexible = api_version >= 9
        if flexible:  # request header v2: tagged fields
            count, pos = _uvarint(frame, pos)
            for _ in range(count):
                _, pos = _uvarint(frame, pos)
                size, pos = _uvarint(frame, pos)
                pos += size
            length, pos = _uvarint(frame, pos)  # compact nullable transactional_id
            pos += max(length - 1, 0)
        elif api_version >= 3:
            pos = _skip_string16(frame, pos)
        (acks,) = struct.unpack_from(">h", frame, pos)
        return acks
    except (struct.error, IndexError):
        return -1
