"""Test helper: build valid uncompressed v2 record batches (records encoded by hand)."""

from __future__ import annotations

import struct

from txnchaos.cluster.protocol.record_batch import (
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
    compute_crc,
)


def _varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _record(delta: int, value: bytes) -> bytes:
    body = (
        b"\x00"
        + _varint(0)
        + _varint(delta)
        + _varint(-1)
        + _varint(len(value))
        + value
        + _varint(0)
    )
    return _varint(len(body)) + body


def make_batch(
    count: int = 1,
    *,
    producer_id: int = -1,
    epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp: int = 1_000,
    max_timestamp: int | None = None,
    base_offset: int = 0,
    value_size: int = 10,
    attributes: int = 0,
    magic: int = 2,
    records_count: int | None = None,
    last_offset_delta: int | None = None,
    payload: bytes | None = None,
) -> bytes:
    """A valid (correct CRC) batch; overrides let tests build invalid headers."""
    if payload is None:
        payload = b"".join(
            _record(i, bytes([(base_offset + i) % 251]) * value_size) for i in range(count)
        )
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    attrs = attributes | (TRANSACTIONAL_BIT if transactional else 0)
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        -1,
        magic,
        0,
        attrs,
        count - 1 if last_offset_delta is None else last_offset_delta,
        timestamp,
        timestamp if max_timestamp is None else max_timestamp,
        producer_id,
        epoch,
        base_sequence,
        count if records_count is None else records_count,
    )
    buf[HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)
