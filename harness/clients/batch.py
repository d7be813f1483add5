"""Encoding our producer's record batches (uncompressed v2, with record headers).

``cluster/protocol/records.py`` encodes batches without headers; the workload pads records
with a header, so this is the same layout with headers. The header fields come from
``cluster/protocol/record_batch`` so both sides agree on the format.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...cluster.protocol.record_batch import (
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
    _zigzag_varint,
    compute_crc,
)

_U32 = struct.Struct(">I")

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int = 0


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return _zigzag_varint(-1)
    return _zigzag_varint(len(value)) + value


def _record(offset_delta: int, timestamp_delta: int, r: Record) -> bytes:
    parts = [
        b"\x00",
        _zigzag_varint(timestamp_delta),
        _zigzag_varint(offset_delta),
        _bytes_field(r.key),
        _bytes_field(r.value),
        _zigzag_varint(len(r.headers)),
    ]
    for name, value in r.headers:
        parts.append(_bytes_field(name.encode()))
        parts.append(_bytes_field(value))
    body = b"".join(parts)
    return _zigzag_varint(len(body)) + body


def encode_batch(
    records: Sequence[Record],
    *,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytes:
    """One uncompressed v2 batch of ``records`` (timestamps relative to the first)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    first_ts = records[0].timestamp_ms
    max_ts = max(r.timestamp_ms for r in records)
    payload = b"".join(_record(i, r.timestamp_ms - first_ts, r) for i, r in enumerate(records))
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    HEADER.pack_into(
        buf,
        0,
        0,
        size - LOG_OVERHEAD,
        -1,
        CURRENT_MAGIC,
        0,
        TRANSACTIONAL_BIT if transactional else 0,
        len(records) - 1,
        first_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    buf[HEADER_SIZE:] = payload
    _U32.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)


def record_size(r: Record) -> int:
    """An upper bound of the encoded size (for batch size limits)."""
    size = 32 + len(r.key or b"") + len(r.value or b"")
    for name, value in r.headers:
        size += 10 + len(name) + len(value or b"")
    return size
