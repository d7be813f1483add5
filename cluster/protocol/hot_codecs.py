"""Hand-written encoders for the messages on the transaction hot path.

kio's encoders are generic pure Python (a Produce response costs ~50 µs with
``make``, a WriteTxnMarkers request ~100 µs); a transaction needs about ten of these
messages, so they were a large share of the nodes' CPU. These functions write the
same bytes as kio straight from plain values (the unit tests compare them with
kio byte for byte, for every version served):

* responses: Produce v3-v13 (v13 names topics by id), AddPartitionsToTxn v0-v3, EndTxn
  v0-v5 (v5 with the producer id/epoch of KIP-890), WriteTxnMarkers v1-v2 (bodies,
  without the response header; handlers wrap them in :class:`~.codec.EncodedResponse`);
* the WriteTxnMarkers v1-v2 request body (the coordinator's markers), from the kio
  request entity (``codec.encode_request`` picks it automatically).

Decoding stays with kio: its readers are compiled and already fast.

Layout reminders: below the first flexible version strings are ``int16 length`` +
UTF-8 (null: -1) and arrays ``int32 count``; from it on they are compact (unsigned
varint of length + 1, null: 0) and every struct ends with its tagged fields (here
always none: a single 0 byte, since kio omits tagged fields at their defaults).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .record_batch import uvarint

_I16 = struct.Struct(">h").pack
_I32 = struct.Struct(">i").pack
_I64 = struct.Struct(">q").pack
_PARTITION_HEAD = struct.Struct(">ihqq").pack  # index, error, base offset, append time
_PARTITION_ERROR = struct.Struct(">ih").pack  # partition index, error code
_MARKER_HEAD = struct.Struct(">qhb").pack  # producer id, epoch, result
_NO_TAGS = b"\x00"

PRODUCE_VERSIONS = range(3, 14)
ADD_PARTITIONS_TO_TXN_VERSIONS = range(0, 4)
END_TXN_VERSIONS = range(0, 6)
WRITE_TXN_MARKERS_VERSIONS = range(1, 3)

PartitionResult = tuple[int, int, int, int, int, Sequence[tuple[int, str | None]], str | None]
"""A Produce partition answer: (index, error code, base offset, log append time ms,
log start offset, record errors as (batch index, message), error message)."""


_STRINGS: dict[tuple[str, bool], bytes] = {}


def string(value: str, flexible: bool) -> bytes:
    """A non-null string; topic names repeat, so their encodings are cached."""
    key = (value, flexible)
    cached = _STRINGS.get(key)
    if cached is not None:
        return cached
    raw = value.encode()
    out = (uvarint(len(raw) + 1) if flexible else _I16(len(raw))) + raw
    if len(_STRINGS) < 4096:
        _STRINGS[key] = out
    return out


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (uvarint(len(raw) + 1) if flexible else _I16(len(raw))) + raw


def array_length(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _I32(count)


def _check(version: int, supported: range, what: str) -> None:
    if version not in supported:
        raise ValueError(f"no hand-written {what} encoder for version {version}")


def topic_key(topic: str | uuid.UUID, flexible: bool) -> bytes:
    """A Produce response's topic: its name (v3-v12) or its id (v13+, 16 bytes)."""
    if isinstance(topic, uuid.UUID):
        return topic.bytes
    return string(topic, flexible)


def produce_response(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionResult]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """ProduceResponse v3-v13 body (v9+ flexible; no current-leader / node-endpoint tags);
    topics by name, or by id from v13 on."""
    _check(version, PRODUCE_VERSIONS, "Produce response")
    if len(topics) == 1 and len(topics[0][1]) == 1:
        name, (partition,) = topics[0]
        if not partition[5] and partition[6] is None:
            # The usual answer (librdkafka sends one partition per request, and it
            # succeeds): fixed bytes around the partition's numbers.
            head, tail = _single_partition_frame(version, name, throttle_time_ms)
            index, error, base, append_time, log_start = partition[:5]
            if version >= 5:
                return head + _PARTITION_HEAD_LSO(index, error, base, append_time, log_start) + tail
            return head + _PARTITION_HEAD(index, error, base, append_time) + tail
    flexible = version >= 9
    with_log_start = version >= 5
    with_record_errors = version >= 8
    parts = [array_length(len(topics), flexible)]
    append = parts.append
    for name, partitions in topics:
        append(topic_key(name, flexible))
        append(array_length(len(partitions), flexible))
        for index, error, base, append_time, log_start, record_errors, message in partitions:
            append(_PARTITION_HEAD(index, error, base, append_time))
            if with_log_start:
                append(_I64(log_start))
            if with_record_errors:
                append(array_length(len(record_errors), flexible))
                for batch_index, batch_message in record_errors:
                    append(_I32(batch_index))
                    append(nullable_string(batch_message, flexible))
                    if flexible:
                        append(_NO_TAGS)
                append(nullable_string(message, flexible))
            if flexible:
                append(_NO_TAGS)
        if flexible:
            append(_NO_TAGS)
    append(_I32(throttle_time_ms))
    if flexible:
        append(_NO_TAGS)
    return b"".join(parts)


_PARTITION_HEAD_LSO = struct.Struct(">ihqqq").pack


@lru_cache(maxsize=1024)
def _single_partition_frame(
    version: int, name: str | uuid.UUID, throttle_time_ms: int
) -> tuple[bytes, bytes]:
    """The bytes before and after the partition numbers of a one-partition Produce
    response without record errors or message."""
    flexible = version >= 9
    head = array_length(1, flexible) + topic_key(name, flexible) + array_length(1, flexible)
    tail = b""
    if version >= 8:
        tail += array_length(0, flexible) + nullable_string(None, flexible)
    if flexible:
        tail += _NO_TAGS + _NO_TAGS
    tail += _I32(throttle_time_ms)
    if flexible:
        tail += _NO_TAGS
    return head, tail


def add_partitions_to_txn_response(
    version: int,
    results: Sequence[tuple[str, Sequence[tuple[int, int]]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """AddPartitionsToTxnResponse v0-v3 body: topic -> (partition, error code)."""
    _check(version, ADD_PARTITIONS_TO_TXN_VERSIONS, "AddPartitionsToTxn response")
    flexible = version >= 3
    parts = [_I32(throttle_time_ms), array_length(len(results), flexible)]
    append = parts.append
    for name, partitions in results:
        append(string(name, flexible))
        append(array_length(len(partitions), flexible))
        for index, error in partitions:
            append(_PARTITION_ERROR(index, error))
            if flexible:
                append(_NO_TAGS)
        if flexible:
            append(_NO_TAGS)
    if flexible:
        append(_NO_TAGS)
    return b"".join(parts)


_END_TXN = struct.Struct(">ih").pack
_END_TXN_V5 = struct.Struct(">ihqh").pack


def end_txn_response(
    version: int,
    error_code: int,
    throttle_time_ms: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> bytes:
    """EndTxnResponse v0-v5 body (v5 adds the producer id and epoch to use next)."""
    _check(version, END_TXN_VERSIONS, "EndTxn response")
    if version >= 5:
        return _END_TXN_V5(throttle_time_ms, error_code, producer_id, producer_epoch) + _NO_TAGS
    body = _END_TXN(throttle_time_ms, error_code)
    return body + _NO_TAGS if version >= 3 else body


def write_txn_markers_response(
    version: int,
    markers: Sequence[tuple[int, Sequence[tuple[str, Sequence[tuple[int, int]]]]]],
) -> bytes:
    """WriteTxnMarkersResponse v1-v2 body: producer id -> topic -> (partition, error)."""
    _check(version, WRITE_TXN_MARKERS_VERSIONS, "WriteTxnMarkers response")
    parts = [uvarint(len(markers) + 1)]
    append = parts.append
    for producer_id, topics in markers:
        append(_I64(producer_id))
        append(uvarint(len(topics) + 1))
        for name, partitions in topics:
            append(string(name, True))
            append(uvarint(len(partitions) + 1))
            for index, error in partitions:
                append(_PARTITION_ERROR(index, error))
                append(_NO_TAGS)
            append(_NO_TAGS)
        append(_NO_TAGS)
    append(_NO_TAGS)
    return b"".join(parts)


def write_txn_markers_request(request: Any) -> bytes:
    """WriteTxnMarkersRequest v1-v2 body from its kio entity (v2 adds the marker's
    transaction version)."""
    version = type(request).__version__
    _check(version, WRITE_TXN_MARKERS_VERSIONS, "WriteTxnMarkers request")
    with_tv = version >= 2
    parts = [uvarint(len(request.markers) + 1)]
    append = parts.append
    for marker in request.markers:
        append(
            _MARKER_HEAD(
                marker.producer_id, marker.producer_epoch, 1 if marker.transaction_result else 0
            )
        )
        append(uvarint(len(marker.topics) + 1))
        for topic in marker.topics:
            append(string(topic.name, True))
            indexes = topic.partition_indexes
            append(uvarint(len(indexes) + 1))
            append(struct.pack(f">{len(indexes)}i", *indexes))
            append(_NO_TAGS)
        append(_I32(marker.coordinator_epoch))
        if with_tv:
            append(bytes((marker.transaction_version & 0xFF,)))
        append(_NO_TAGS)
    append(_NO_TAGS)
    return b"".join(parts)


__all__ = [
    "ADD_PARTITIONS_TO_TXN_VERSIONS",
    "END_TXN_VERSIONS",
    "PRODUCE_VERSIONS",
    "WRITE_TXN_MARKERS_VERSIONS",
    "PartitionResult",
    "add_partitions_to_txn_response",
    "array_length",
    "end_txn_response",
    "nullable_string",
    "produce_response",
    "string",
    "uvarint",
    "write_txn_markers_request",
    "write_txn_markers_response",
]
