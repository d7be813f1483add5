"""Checks on the records of a Produce request before anything is appended.

Mirrors Kafka's ProduceRequest.validateRecords / LogValidator for magic v2, on the
batch header only (records are never decompressed).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.record_batch import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    crc_ok,
    parse_header,
)
from ..storage.config import LogConfig

NONE = 0
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
INVALID_RECORD = 87

MAX_CODEC = 4  # zstd


@dataclass(frozen=True, slots=True)
class BatchCheck:
    header: BatchHeader | None
    error_code: int = NONE
    message: str | None = None


def _fail(code: int, message: str) -> BatchCheck:
    return BatchCheck(None, code, message)


def validate_client_batch(records: bytes | bytearray | memoryview, config: LogConfig) -> BatchCheck:
    """The header of the single valid v2 batch in ``records``, or the error to return."""
    n = len(records)
    if n == 0:
        return _fail(INVALID_RECORD, "produce request must contain exactly one record batch")
    if n > MAGIC_OFFSET and records[MAGIC_OFFSET] != CURRENT_MAGIC:
        return _fail(
            UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"record batch magic {records[MAGIC_OFFSET]} is not supported (only v2)",
        )
    if n < HEADER_SIZE:
        return _fail(CORRUPT_MESSAGE, f"record batch truncated: {n} bytes")
    header = parse_header(records)
    size = header.size
    if header.batch_length < MIN_BATCH_LENGTH:
        return _fail(CORRUPT_MESSAGE, f"record batch length {header.batch_length} too small")
    if size > n:
        return _fail(CORRUPT_MESSAGE, f"record batch truncated: {n} of {size} bytes")
    if size < n:
        return _fail(INVALID_RECORD, "produce request must contain exactly one record batch")
    if header.base_offset != 0:
        return _fail(
            INVALID_RECORD, f"base offset of a produced batch must be 0, not {header.base_offset}"
        )
    if size > config.max_message_bytes:
        return _fail(
            MESSAGE_TOO_LARGE,
            f"record batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}",
        )
    if size > config.segment_bytes:
        return _fail(
            RECORD_LIST_TOO_LARGE,
            f"record batch of {size} bytes exceeds segment.bytes {config.segment_bytes}",
        )
    if not crc_ok(records, 0, header):
        return _fail(CORRUPT_MESSAGE, "record batch CRC mismatch")
    if header.records_count <= 0:
        return _fail(INVALID_RECORD, f"invalid record count {header.records_count}")
    if header.last_offset_delta != header.records_count - 1:
        return _fail(
            INVALID_RECORD,
            f"last offset delta {header.last_offset_delta} does not match record count "
            f"{header.records_count}",
        )
    if header.compression > MAX_CODEC:
        return _fail(INVALID_RECORD, f"unknown compression codec {header.compression}")
    if header.is_control:
        return _fail(INVALID_RECORD, "clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        return _fail(INVALID_RECORD, f"invalid sequence {header.base_sequence} for producer")
    if header.is_transactional and not header.has_producer_id:
        return _fail(INVALID_RECORD, "transactional record batch without a producer id")
    return BatchCheck(header)
