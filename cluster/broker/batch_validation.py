"""Checks on the records of a Produce request before anything is appended.

Mirrors Kafka's ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords and
LogValidator for magic v2 (issue 35, item 9: a batch whose header claimed 2^31-1 records
moved the high watermark to 2,147,483,647 and poisoned every consumer). The header is
checked first (size, CRC, offset range against the count, control bit, sequence), then
every record is walked (``record_walk``; a compressed batch is decompressed first, as
Kafka does, within ``decompressed_limit``): a count that contradicts the records present,
a malformed varint or length, or bytes after the last record is INVALID_RECORD; a
compressed payload its codec cannot read is CORRUPT_MESSAGE (Kafka answers
UNKNOWN_SERVER_ERROR there); a record timestamp outside
[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] is
INVALID_TIMESTAMP naming each such record, and so is a batch a client marked
LogAppendTime (topics here are CreateTime only). The batch's max timestamp is the largest
record timestamp (``BatchCheck.max_timestamp``; Kafka rewrites the header to it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.compression import TooLarge, Undecodable, decompress
from ..protocol.record_batch import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    crc_ok,
    parse_header,
)
from ..protocol.record_walk import BadRecords, timestamp_outliers, walk_records
from ..storage.config import LogConfig

NONE = 0
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
INVALID_TIMESTAMP = 32
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
INVALID_RECORD = 87

MAX_CODEC = 4  # zstd
NO_TIMESTAMP = -1
MIN_DECOMPRESSED_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BatchCheck:
    header: BatchHeader | None
    error_code: int = NONE
    message: str | None = None
    # the largest record timestamp (-1 if none): what the stored header's max timestamp is
    max_timestamp: int = NO_TIMESTAMP
    record_errors: tuple[tuple[int, str | None], ...] = ()


def _fail(code: int, message: str, errors: tuple[tuple[int, str | None], ...] = ()) -> BatchCheck:
    return BatchCheck(None, code, message, record_errors=errors)


def decompressed_limit(config: LogConfig) -> int:
    """The most bytes a compressed batch's records may decompress to: 64 MiB, or four
    times max.message.bytes if that is more (Kafka streams them and has no such bound;
    a consumer, which holds a batch's records whole, could not read more anyway)."""
    return max(MIN_DECOMPRESSED_LIMIT, 4 * config.max_message_bytes)


def validate_client_batch(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    clock: Callable[[], float] = time.time,
) -> BatchCheck:
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
    if header.timestamp_type:
        return _fail(
            INVALID_TIMESTAMP,
            "Invalid timestamp type LogAppendTime: producers must not set it",
        )
    return _check_records(records, header, config, clock)


def _check_records(
    records: bytes | bytearray | memoryview,
    header: BatchHeader,
    config: LogConfig,
    clock: Callable[[], float],
) -> BatchCheck:
    count = header.records_count
    if header.compression:
        try:
            with memoryview(records) as view:
                body = decompress(
                    header.compression, view[HEADER_SIZE : header.size], decompressed_limit(config)
                )
        except Undecodable as e:
            return _fail(CORRUPT_MESSAGE, f"records cannot be decompressed: {e}")
        except TooLarge as e:
            return _fail(MESSAGE_TOO_LARGE, str(e))
        start = 0
    else:
        # the batch is the whole of ``records`` (checked above)
        body = records if not isinstance(records, memoryview) else bytes(records)
        start = HEADER_SIZE
    try:
        low, high = walk_records(body, start, count)
    except BadRecords as e:
        return _fail(INVALID_RECORD, str(e))
    base = header.base_timestamp
    now = int(clock() * 1000)
    earliest = now - config.timestamp_before_max_ms
    latest = now + config.timestamp_after_max_ms
    if base + low < earliest or base + high > latest:
        outliers = timestamp_outliers(body, start, count, base, earliest, latest)
        if outliers:
            errors = tuple(
                (
                    i,
                    f"Timestamp of record {i} is out of range. The timestamp should be "
                    f"within [{earliest}, {latest}]",
                )
                for i in outliers
            )
            return _fail(
                INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp",
                errors,
            )
    return BatchCheck(header, max_timestamp=max(NO_TIMESTAMP, base + high))
