"""Kafka v2 record-batch headers, read and patched with ``struct``.

Data batches are opaque bytes here: their records may be compressed with any
codec and are never decoded. Only the fixed 61-byte header is parsed, and only
the fields outside the CRC (base offset, partition leader epoch) are rewritten,
so no CRC has to be recomputed. The one exception is the control batch
(transaction marker), which this module can build and read.

Layout (big-endian)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records...

``batchLength`` counts the bytes after itself; the CRC-32C covers ``attributes``
to the end of the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers the batch from here to its end
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35
CURRENT_MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


# BatchHeader from the unpacked fields, without the argument parsing of its __new__
_new_header = tuple.__new__


class CorruptBatch(ValueError):
    """Bytes that are not a well-formed v2 record batch (truncated, bad length, ...)."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence arithmetic: int32 that wraps from INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class BatchHeader(NamedTuple):
    """The fixed fields of a batch, in header order (immutable).

    A named tuple rather than a frozen dataclass: ``parse_header`` runs two or three
    times per produced batch and marker, and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) cost more than the rest of the parse."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header at ``pos``. Raises CorruptBatch if fewer than 61 bytes remain."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatch(
            f"batch header at position {pos} truncated: {len(buf) - pos} of {HEADER_SIZE} bytes"
        )
    return _new_header(BatchHeader, HEADER.unpack_from(buf, pos))


def check_length(header: BatchHeader, pos: int, available: int) -> None:
    """Raise CorruptBatch unless the batch at ``pos`` has a sane length that fits."""
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatch(
            f"batch at position {pos} has length {header.batch_length}, "
            f"below the minimum {MIN_BATCH_LENGTH}"
        )
    if pos + header.size > available:
        raise CorruptBatch(
            f"batch at position {pos} truncated: needs {header.size} bytes, "
            f"{available - pos} available"
        )


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch; CorruptBatch on truncated/invalid lengths."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_header(buf, pos)
        check_length(header, pos, end)
        yield pos, header
        pos += header.size


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    with memoryview(buf) as view:
        return crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    if pos + header.size > len(buf) or header.size < HEADER_SIZE:
        return False
    return compute_crc(buf, pos, header.size) == header.crc


def set_base_offset(buf: bytearray, pos: int, offset: int) -> None:
    """Rewrite the base offset in place (it is outside the CRC)."""
    _I64.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Rewrite the partition leader epoch in place (it is outside the CRC)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(buf: bytearray, pos: int, size: int, timestamp: int) -> None:
    """Rewrite the max timestamp in place and recompute the CRC (it covers the field)."""
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def with_base_offset(buf: bytes | bytearray, new_base: int) -> bytes:
    """A copy of the single batch ``buf`` with its base offset replaced."""
    out = bytearray(buf)
    set_base_offset(out, 0, new_base)
    return bytes(out)


# -- control batches (transaction markers) -------------------------------------------


def uvarint(value: int) -> bytes:
    """Unsigned varint (protocol lengths and tag counts; zig-zagged record fields)."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag_varint(value: int) -> bytes:
    return uvarint((value << 1) ^ (value >> 63))


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    n = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptBatch("truncated or overlong varint in control record")
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


@lru_cache(maxsize=256)
def _control_record(commit: bool, coordinator_epoch: int) -> bytes:
    """The single record of a marker (it depends on the outcome and epoch only)."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _zigzag_varint(0)  # timestamp delta
        + _zigzag_varint(0)  # offset delta
        + _zigzag_varint(len(key))
        + key
        + _zigzag_varint(len(value))
        + value
        + _zigzag_varint(0)  # header count
    )
    return _zigzag_varint(len(body)) + body


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A transaction marker: a transactional control batch with one record.

    Key: version int16 0, type int16 (0 abort, 1 commit). Value: version int16 0,
    coordinatorEpoch int32.
    """
    record = _control_record(commit, coordinator_epoch)
    size = HEADER_SIZE + len(record)
    buf = bytearray(size)
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        TRANSACTIONAL_BIT | CONTROL_BIT,
        0,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        1,
    )
    buf[HEADER_SIZE:] = record
    _U32.pack_into(buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)


def control_record_key(batch: bytes | bytearray | memoryview) -> tuple[int, bytes]:
    """(control type, value bytes) of the first record of a control batch."""
    header = parse_header(batch)
    check_length(header, 0, len(batch))
    if not header.is_control:
        raise CorruptBatch("not a control batch")
    if header.compression != 0:
        raise CorruptBatch("control batches are never compressed")
    if header.records_count < 1:
        raise CorruptBatch("control batch without records")
    view = memoryview(batch)[: header.size]
    pos = HEADER_SIZE
    length, pos = _read_varint(view, pos)
    end = pos + length
    if length < 0 or end > len(view):
        raise CorruptBatch("control record truncated")
    pos += 1  # record attributes
    _, pos = _read_varint(view, pos)  # timestamp delta
    _, pos = _read_varint(view, pos)  # offset delta
    key_len, pos = _read_varint(view, pos)
    if key_len < 4 or pos + key_len > end:
        raise CorruptBatch("control record key too short")
    _version, ctype = struct.unpack_from(">hh", view, pos)
    pos += key_len
    value_len, pos = _read_varint(view, pos)
    value = bytes(view[pos : pos + max(value_len, 0)]) if value_len > 0 else b""
    if pos + max(value_len, 0) > end:
        raise CorruptBatch("control record value truncated")
    return ctype, value


def parse_control_record(batch: bytes | bytearray | memoryview) -> tuple[bool, int]:
    """(commit, coordinator_epoch) of a transaction marker batch."""
    ctype, value = control_record_key(batch)
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise CorruptBatch(f"control record type {ctype} is not a transaction marker")
    if len(value) < 6:
        raise CorruptBatch("transaction marker value too short")
    _version, coordinator_epoch = struct.unpack_from(">hi", value, 0)
    return ctype == CONTROL_COMMIT, coordinator_epoch
