from __future__ import annotations

import pytest

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.protocol.record_batch import (
    HEADER_SIZE,
    INT32_MAX,
    CorruptBatch,
    build_control_batch,
    crc_ok,
    increment_sequence,
    iter_batches,
    parse_control_record,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
    with_base_offset,
)


def test_header_fields_and_properties() -> None:
    raw = make_batch(
        3,
        producer_id=42,
        epoch=7,
        base_sequence=10,
        transactional=True,
        timestamp=5,
        max_timestamp=9,
        attributes=0x08 | 0x03,
        base_offset=100,
    )
    h = parse_header(raw)
    assert h.base_offset == 100
    assert h.size == len(raw)
    assert h.magic == 2
    assert h.records_count == 3
    assert h.last_offset_delta == 2
    assert h.last_offset == 102
    assert h.next_offset == 103
    assert h.producer_id == 42 and h.producer_epoch == 7
    assert h.base_sequence == 10 and h.last_sequence == 12
    assert h.is_transactional and not h.is_control
    assert h.compression == 3
    assert h.timestamp_type == 1
    assert h.base_timestamp == 5 and h.max_timestamp == 9
    assert h.has_producer_id


def test_last_sequence_wraps_around_int32() -> None:
    h = parse_header(make_batch(5, producer_id=1, epoch=0, base_sequence=INT32_MAX - 1))
    assert h.last_sequence == 2  # MAX-1, MAX, 0, 1, 2
    assert increment_sequence(INT32_MAX, 1) == 0
    assert parse_header(make_batch(2)).last_sequence == -1  # no sequence stays -1


def test_iter_batches_and_crc() -> None:
    batches = [make_batch(i + 1, base_offset=o) for i, o in enumerate((0, 1, 3))]
    buf = b"".join(batches)
    found = list(iter_batches(buf))
    assert [pos for pos, _ in found] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [h.base_offset for _, h in found] == [0, 1, 3]
    assert all(crc_ok(buf, pos, h) for pos, h in found)
    flipped = bytearray(buf)
    flipped[-1] ^= 0xFF
    pos, h = found[-1]
    assert not crc_ok(flipped, pos, h)


@pytest.mark.parametrize("cut", [1, 30, HEADER_SIZE, -1])
def test_iter_batches_truncated_raises(cut: int) -> None:
    buf = make_batch(2) + make_batch(2)
    truncated = buf[: len(make_batch(2)) + cut] if cut > 0 else buf[:cut]
    with pytest.raises(CorruptBatch, match="truncated"):
        list(iter_batches(truncated))


def test_iter_batches_invalid_length_raises() -> None:
    buf = bytearray(make_batch(1))
    buf[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptBatch, match="below the minimum"):
        list(iter_batches(buf))


def test_base_offset_rewrite_keeps_crc_valid() -> None:
    raw = make_batch(4)
    moved = with_base_offset(raw, 1234)
    h = parse_header(moved)
    assert h.base_offset == 1234 and h.last_offset == 1237
    assert crc_ok(moved, 0, h)
    buf = bytearray(make_batch(1) + raw)
    set_base_offset(buf, len(make_batch(1)), 77)
    set_partition_leader_epoch(buf, len(make_batch(1)), 5)
    h2 = parse_header(buf, len(make_batch(1)))
    assert h2.base_offset == 77 and h2.partition_leader_epoch == 5
    assert crc_ok(buf, len(make_batch(1)), h2)


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_round_trip(commit: bool) -> None:
    raw = build_control_batch(9, 3, 17, commit, 123456, base_offset=50, partition_leader_epoch=2)
    h = parse_header(raw)
    assert h.is_control and h.is_transactional
    assert h.producer_id == 9 and h.producer_epoch == 3
    assert h.base_sequence == -1 and h.records_count == 1 and h.last_offset_delta == 0
    assert h.base_offset == 50 and h.partition_leader_epoch == 2
    assert h.base_timestamp == h.max_timestamp == 123456
    assert h.size == len(raw)
    assert crc_ok(raw, 0, h)
    assert parse_control_record(raw) == (commit, 17)
    assert list(iter_batches(raw)) == [(0, h)]


def test_parse_control_record_rejects_data_batch() -> None:
    with pytest.raises(CorruptBatch):
        parse_control_record(make_batch(1))


def test_parse_header_short_buffer() -> None:
    with pytest.raises(CorruptBatch):
        parse_header(b"\x00" * 60)


def test_against_kafka_python_independent_codec() -> None:
    """kafka-python's own v2 codec agrees on control batches and compressed data batches."""
    default_records = pytest.importorskip("kafka.record.default_records")
    raw = build_control_batch(9, 3, 17, True, 123456, base_offset=50)
    theirs = default_records.DefaultRecordBatch(raw)
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    (record,) = list(theirs)
    assert record.offset == 50 and record.key == b"\x00\x00\x00\x01"

    builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=1,
        is_transactional=True,
        producer_id=5,
        producer_epoch=2,
        base_sequence=40,
        batch_size=1 << 20,
    )
    for i in range(3):
        builder.append(i, timestamp=1000 + i, key=None, value=b"v" * 500, headers=[])
    data = bytes(builder.build())
    h = parse_header(data)
    assert crc_ok(data, 0, h)
    assert (h.compression, h.records_count, h.last_offset_delta) == (1, 3, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (5, 2, 40, 42)
    assert h.is_transactional and h.max_timestamp == 1002
