"""Issue 35, item 9: a produced batch is checked record by record against its header, as
Kafka's LogValidator does, and refused with Kafka's error; every valid shape of every
codec is still accepted."""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path

import pytest

from txnchaos.cluster.broker.batch_validation import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    MESSAGE_TOO_LARGE,
    validate_client_batch,
)
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    compress,
    xerial_snappy,
)
from txnchaos.cluster.protocol.record_batch import (
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    _zigzag_varint,
    compute_crc,
    iter_batches,
    parse_header,
)
from txnchaos.cluster.protocol.records import encode_batch, encode_record
from txnchaos.cluster.storage.config import LogConfig

CONFIG = LogConfig()
NOW_MS = int(time.time() * 1000)


def varint(value: int) -> bytes:
    return _zigzag_varint(value)


def batch(
    payload: bytes,
    count: int,
    *,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_timestamp: int = NOW_MS,
    max_timestamp: int | None = None,
) -> bytes:
    """A batch around ``payload`` (records, compressed or not) with a valid CRC."""
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    HEADER.pack_into(
        buf,
        0,
        0,
        size - LOG_OVERHEAD,
        0,
        2,
        0,
        attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        base_timestamp if max_timestamp is None else max_timestamp,
        -1,
        -1,
        -1,
        count,
    )
    buf[HEADER_SIZE:] = payload
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, size))
    return bytes(buf)


def records(n: int, **kw: int) -> bytes:
    return b"".join(encode_record(i, kw.get("ts", 0), b"k", b"value-%d" % i) for i in range(n))


def body(fields: bytes) -> bytes:
    """A record whose length prefix is right for ``fields``."""
    return varint(len(fields)) + fields


def check(buf: bytes, config: LogConfig = CONFIG) -> tuple[int, str | None]:
    result = validate_client_batch(buf, config)
    return result.error_code, result.message


# -- refused shapes ---------------------------------------------------------------------


def test_the_reported_count_of_two_to_the_31_minus_one_is_refused() -> None:
    code, message = check(batch(records(1), 2**31 - 1))
    assert code == INVALID_RECORD
    assert "premature EOF" in (message or "")


@pytest.mark.parametrize(
    ("shape", "payload", "count", "words"),
    [
        ("fewer records than the count", records(2), 3, "premature EOF"),
        ("more records than the count", records(3), 2, "still remaining"),
        ("stray bytes after the last record", records(2) + b"\x00", 2, "still remaining"),
        ("record longer than the batch", varint(500) + b"\x00" * 10, 1, "Invalid record size"),
        ("record shorter than its fields", body(b"\x00\x00\x00\x02k\x00\x00")[:-1], 1, "size"),
        ("negative record length", varint(-3) + b"\x00" * 9, 1, "Invalid record size"),
        ("overlong varint", body(b"\x00\x00" + b"\xff" * 5 + b"\x01\x00\x00\x00"), 1, "too long"),
        ("overlong varlong", body(b"\x00" + b"\xff" * 10 + b"\x01\x00\x00\x00\x00"), 1, "long"),
        ("offset delta not the index", encode_record(0, 0, None, b"a") * 2, 2, "offset delta"),
        ("key length below -1", body(b"\x00\x00\x00" + varint(-5) + b"\x00\x00"), 1, "key"),
        ("value length below -1", body(b"\x00\x00\x00\x01" + varint(-7) + b"\x00"), 1, "value"),
        ("negative header count", body(b"\x00\x00\x00\x01\x01" + varint(-2)), 1, "headers"),
        ("header count beyond the record", body(b"\x00\x00\x00\x01\x01" + varint(40)), 1, "head"),
        (
            "null header key",
            body(b"\x00\x00\x00\x01\x01" + varint(1) + varint(-1) + varint(-1)),
            1,
            "header key",
        ),
    ],
)
def test_records_that_contradict_the_header_are_invalid(
    shape: str, payload: bytes, count: int, words: str
) -> None:
    code, message = check(batch(payload, count))
    assert code == INVALID_RECORD, shape
    assert words in (message or ""), (shape, message)


def test_an_offset_range_that_contradicts_the_count_is_invalid() -> None:
    code, _ = check(batch(records(3), 3, last_offset_delta=5))
    assert code == INVALID_RECORD


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_codec_is_invalid(codec: int) -> None:
    assert check(batch(records(1), 1, attributes=codec))[0] == INVALID_RECORD


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_an_undecodable_compressed_payload_is_corrupt(codec: int) -> None:
    garbage = b"\x13\x37" * 40
    code, message = check(batch(garbage, 1, attributes=codec))
    assert code == CORRUPT_MESSAGE, message
    truncated = compress(codec, records(50))[:-9]
    assert check(batch(truncated, 50, attributes=codec))[0] == CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compressed_records_are_checked_against_the_header(codec: int) -> None:
    payload = compress(codec, records(3))
    code, message = check(batch(payload, 2**31 - 1, attributes=codec))
    assert code == INVALID_RECORD
    code, message = check(batch(payload, 2, attributes=codec))
    assert code == INVALID_RECORD and "still remaining" in (message or "")


def test_a_batch_that_decompresses_beyond_the_bound_is_too_large() -> None:
    # one 65 MiB record of zeros: a few kilobytes of zstd
    huge = encode_record(0, 0, None, bytes(65 * 1024 * 1024))
    code, message = check(batch(compress(ZSTD, huge), 1, attributes=ZSTD))
    assert code == MESSAGE_TOO_LARGE, message


def test_a_timestamp_too_far_ahead_is_invalid_and_names_the_record() -> None:
    two_hours = 2 * 3600 * 1000
    payload = encode_record(0, 0, None, b"now") + encode_record(1, two_hours, None, b"later")
    result = validate_client_batch(batch(payload, 2), CONFIG)
    assert result.error_code == INVALID_TIMESTAMP
    assert [i for i, _ in result.record_errors] == [1]
    relaxed = LogConfig(timestamp_after_max_ms=3 * 3600 * 1000)
    assert validate_client_batch(batch(payload, 2), relaxed).error_code == 0


def test_message_timestamp_before_max_ms_is_honoured() -> None:
    old = batch(records(2), 2, base_timestamp=NOW_MS - 10 * 24 * 3600 * 1000)
    assert check(old)[0] == 0  # Kafka's default: no bound in the past
    assert check(old, LogConfig(timestamp_before_max_ms=24 * 3600 * 1000))[0] == INVALID_TIMESTAMP
    no_timestamp = batch(records(1), 1, base_timestamp=-1)
    assert check(no_timestamp, LogConfig(timestamp_before_max_ms=0))[0] == 0


def test_log_append_time_from_a_producer_is_invalid() -> None:
    code, _ = check(batch(records(1), 1, attributes=TIMESTAMP_TYPE_BIT))
    assert code == INVALID_TIMESTAMP


# -- accepted shapes --------------------------------------------------------------------


def headered_records(n: int) -> bytes:
    """Records with headers, a null key, a null header value and growing timestamps."""
    out = []
    for i in range(n):
        fields = (
            b"\x00"
            + varint(i * 3)
            + varint(i)
            + (varint(-1) if i % 2 else varint(3) + b"key")
            + varint(200)
            + bytes(200)
            + varint(2)
            + varint(1)
            + b"h"
            + varint(-1)
            + varint(2)
            + b"h2"
            + varint(1)
            + b"x"
        )
        out.append(body(fields))
    return b"".join(out)


@pytest.mark.parametrize(
    ("codec", "pack"),
    [
        (0, lambda data: data),
        (GZIP, lambda data: compress(GZIP, data)),
        (GZIP, lambda data: compress(GZIP, data[:100]) + compress(GZIP, data[100:])),
        (SNAPPY, lambda data: compress(SNAPPY, data)),
        (SNAPPY, lambda data: xerial_snappy(data, block_size=1000)),
        (LZ4, lambda data: compress(LZ4, data)),
        (ZSTD, lambda data: compress(ZSTD, data)),
    ],
    ids=["none", "gzip", "gzip-two-members", "snappy", "snappy-xerial", "lz4", "zstd"],
)
def test_valid_batches_of_every_codec_are_accepted(codec: int, pack: object) -> None:
    n = 300
    payload = pack(headered_records(n))  # type: ignore[operator]
    result = validate_client_batch(batch(payload, n, attributes=codec), CONFIG)
    assert result.error_code == 0, result.message
    assert result.max_timestamp == NOW_MS + (n - 1) * 3


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4, ZSTD])
def test_encode_batch_writes_every_codec(codec: int) -> None:
    buf = encode_batch([b"a", (b"k", b"b"), (None, None)], compression=codec)
    assert parse_header(buf).compression == codec
    assert validate_client_batch(buf, CONFIG).error_code == 0


def test_the_stored_max_timestamp_is_the_largest_record_timestamp(tmp_path: Path) -> None:
    """A header's max timestamp that its records contradict is rewritten (with its CRC) as
    Kafka's LogValidator does, so the time index follows the records."""
    partition = Partition("t", uuid.uuid4(), 0, tmp_path, CONFIG)
    try:
        lying = batch(records(3, ts=7), 3, max_timestamp=NOW_MS + 999_999)
        assert partition.append_records(lying).error_code == 0
        stored = partition.read(0, 1 << 20).records
        ((_, header),) = list(iter_batches(stored))
        assert header.max_timestamp == NOW_MS + 7
        assert validate_client_batch(_zero_base(stored), CONFIG).error_code == 0
    finally:
        partition.close()


def _zero_base(stored: bytes) -> bytes:
    """The stored batch as a producer would send it (base offset 0): its CRC must hold."""
    return bytes(8) + stored[8:]
