"""Encoding v2 record batches, for the project's own protocol-level clients (raw
tests, the new-protocol and 2PC producers, the fuzzer).

The broker never writes data batches: it stores what producers send.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence

from .compression import compress
from .record_batch import (
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    _zigzag_varint,
    compute_crc,
)

_U32 = struct.Struct(">I")

Record = bytes | tuple[bytes | None, bytes | None]


def _bytes_field(value: bytes | None) -> bytes:
    if value is None:
        return _zigzag_varint(-1)
    return _zigzag_varint(len(value)) + value


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = (
        b"\x00"
        + _zigzag_varint(timestamp_delta)
        + _zigzag_varint(offset_delta)
        + _bytes_field(key)
        + _bytes_field(value)
        + _zigzag_varint(0)  # no headers
    )
    return _zigzag_varint(len(body)) + body


def encode_batch(
    records: Sequence[Record],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    timestamp_ms: int | None = None,
    base_offset: int = 0,
    compression: int = 0,
) -> bytes:
    """One batch; each record is ``value`` or ``(key, value)``; ``compression`` is the
    codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    encoded = []
    for i, record in enumerate(records):
        key, value = record if isinstance(record, tuple) else (None, record)
        encoded.append(encode_record(i, 0, key, value))
    payload = b"".join(encoded)
    if compression:
        payload = compress(compression, payload)
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        0,
        CURRENT_MAGIC,
        0,
        (TRANSACTIONAL_BIT if transactional else 0) | compression,
        len(records) - 1,
        ts,
        ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    buf[HEADER_SIZE:] = payload
    _U32.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)
