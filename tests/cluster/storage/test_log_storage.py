from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.protocol.record_batch import crc_ok, iter_batches, parse_header
from txnchaos.cluster.storage import LogConfig, OffsetOutOfRange, PartitionLog
from txnchaos.cluster.storage.checkpoint import read_offset, write_offset
from txnchaos.cluster.storage.log import CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def fill(log: PartitionLog, n: int, count: int = 2, ts0: int = 1_000) -> list[bytes]:
    """Append n batches of ``count`` records; returns them as written (offsets assigned)."""
    out = []
    for i in range(n):
        base = log.log_end_offset
        raw = make_batch(count, base_offset=base, timestamp=ts0 + i, value_size=20)
        log.append(raw, base)
        out.append(raw)
    return out


def offsets_of(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def all_batches(log: PartitionLog) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"no data at {offset}"
        for pos, h in iter_batches(data):
            out.append(data[pos : pos + h.size])
            offset = h.next_offset
    return out


# -- appends, segments, indexes ------------------------------------------------------


def test_append_assigns_offsets_and_rolls(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 30)
    assert log.log_end_offset == 60
    assert len(log.segments) > 3
    for seg in log.segments:
        assert seg.size <= SMALL.segment_bytes
        assert seg.log_path.name == f"{seg.base_offset:020d}.log"
        assert seg.log_path.exists()
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert all_batches(log) == written
    # the offset index is sparse: entries about every index_interval_bytes
    seg = log.segments[0]
    assert 0 < len(seg.offset_index) < seg.size // 60
    log.close()


def test_append_rewrites_base_offset_and_rejects_going_backwards(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    header = log.append(make_batch(3), 0)
    assert header.last_offset == 2
    h = log.append(make_batch(1, base_offset=0), 3)
    assert h.base_offset == 3
    data = log.read(3, 1000)
    assert offsets_of(data) == [3]
    assert crc_ok(data, 0, parse_header(data))
    with pytest.raises(ValueError):
        log.append(make_batch(1), 2)
    with pytest.raises(ValueError):
        log.append(make_batch(1) + make_batch(1), 4)


def test_every_offset_is_found_through_the_index(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LogConfig(segment_bytes=5000, index_interval_bytes=150))
    fill(log, 60, count=3)
    for offset in range(0, log.log_end_offset):
        data = log.read(offset, 1)
        (first,) = list(iter_batches(data))
        h = first[1]
        assert h.base_offset <= offset <= h.last_offset


def test_segment_ms_rolls_by_time(tmp_path: Path) -> None:
    now = [1000.0]
    log = PartitionLog(tmp_path, LogConfig(segment_ms=60_000), clock=lambda: now[0])
    fill(log, 2)
    now[0] += 61
    fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 4]


# -- read semantics ----------------------------------------------------------------


def test_read_returns_whole_batches_from_the_one_containing_offset(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LogConfig())
    written = fill(log, 5, count=4)  # offsets 0-3, 4-7, ...
    data = log.read(6, 1 << 20)
    assert offsets_of(data) == [4, 8, 12, 16]
    assert data == b"".join(written[1:])


def test_read_max_bytes_and_min_one_batch(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LogConfig())
    written = fill(log, 4)
    size = len(written[0])
    assert offsets_of(log.read(0, size * 2 + size // 2)) == [0, 2]
    assert log.read(0, 10) == written[0]  # bigger than max_bytes, still one whole batch
    assert log.read(0, 10, min_one_batch=False) == b""
    assert offsets_of(log.read(0, size)) == [0]


def test_read_never_returns_batches_at_or_after_max_offset(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LogConfig())
    fill(log, 4)  # batches at 0, 2, 4, 6
    assert offsets_of(log.read(0, 1 << 20, max_offset=4)) == [0, 2]
    assert offsets_of(log.read(0, 1 << 20, max_offset=5)) == [0, 2]  # 4-5 straddles it
    assert log.read(4, 1 << 20, max_offset=4) == b""
    assert log.read(0, 1, max_offset=0) == b""  # max_offset beats min_one_batch


def test_read_bounds(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    fill(log, 3)
    assert log.read(6, 100) == b""  # at the log end: empty, no error
    with pytest.raises(OffsetOutOfRange):
        log.read(7, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    log.delete_records_before(3)
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    assert offsets_of(log.read(3, 1 << 20))[0] == 2  # the batch holding offset 3


def test_read_stays_within_one_segment(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    fill(log, 30)
    first_seg, second = log.segments[0], log.segments[1]
    data = log.read(0, 1 << 20)
    assert offsets_of(data)[-1] < second.base_offset
    assert len(data) == first_seg.size


# -- timestamps ----------------------------------------------------------------------


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    fill(log, 40, ts0=10_000)  # batch i at offset 2i has timestamp 10_000 + i
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_017) == (34, 10_017)
    assert log.offset_for_timestamp(10_039) == (78, 10_039)
    assert log.offset_for_timestamp(10_040) is None
    assert log.max_timestamp() == (78, 10_039)
    log.delete_records_before(35)
    assert log.offset_for_timestamp(0) == (35, 10_017)


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LogConfig(index_interval_bytes=0))
    for ts in (100, 300, 200, 400, 250):
        log.append(make_batch(1, timestamp=ts), log.log_end_offset)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(301) == (3, 400)
    assert log.max_timestamp() == (3, 400)


# -- reopen and recovery -------------------------------------------------------------


def test_clean_reopen_keeps_everything(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 25, ts0=500)
    log.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    log = PartitionLog(tmp_path, SMALL)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert log.recovered_bytes_truncated == 0
    assert log.log_end_offset == 50
    assert all_batches(log) == written
    assert log.offset_for_timestamp(510) == (20, 510)
    assert log.max_timestamp() == (48, 524)
    more = fill(log, 3)
    assert all_batches(log) == written + more


def _crash_copy(log: PartitionLog) -> None:
    """Simulate kill -9: drop file descriptors without checkpoints or the clean marker."""
    for seg in log.segments:
        seg.close()


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncate_mid_batch", "truncate_mid_header", "flip_byte", "zero_length"],
)
def test_recovery_truncates_torn_or_corrupt_tail(tmp_path: Path, damage: str) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 23)
    _crash_copy(log)
    active = log.segments[-1].log_path
    data = bytearray(active.read_bytes())
    last_len = len(written[-1])
    keep = written[:-1]
    if damage == "garbage":
        data += os.urandom(37)
        keep = written
    elif damage == "truncate_mid_batch":
        data = data[: len(data) - last_len // 2]
    elif damage == "truncate_mid_header":
        data = data[: len(data) - last_len + 30]
    elif damage == "flip_byte":
        data[-3] ^= 0x55
    elif damage == "zero_length":
        data[len(data) - last_len + 8 : len(data) - last_len + 12] = b"\0\0\0\0"
    active.write_bytes(bytes(data))
    log = PartitionLog(tmp_path, SMALL)
    assert log.recovered_bytes_truncated > 0
    assert all_batches(log) == keep
    assert log.log_end_offset == len(keep) * 2
    # appends continue right after the last good batch
    more = fill(log, 2)
    log.close()
    log = PartitionLog(tmp_path, SMALL)
    assert all_batches(log) == keep + more


def test_corruption_in_an_older_unflushed_segment_drops_what_follows(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 30)
    _crash_copy(log)
    first = log.segments[0]
    nbatches = len(list(iter_batches(first.log_path.read_bytes())))
    data = bytearray(first.log_path.read_bytes())
    data[-1] ^= 1  # corrupt the last batch of the first segment
    first.log_path.write_bytes(bytes(data))
    log = PartitionLog(tmp_path, SMALL)
    assert all_batches(log) == written[: nbatches - 1]
    assert len(log.segments) == 1


def test_segments_below_recovery_point_are_not_rescanned(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 30)
    log.flush()
    assert read_offset(tmp_path / "recovery-point") == 60
    more = fill(log, 2)
    _crash_copy(log)
    # A payload flip in the first (flushed) segment keeps lengths valid: it is only
    # caught by a CRC scan, which flushed segments do not get.
    first = log.segments[0].log_path
    data = bytearray(first.read_bytes())
    data[-1] ^= 1
    first.write_bytes(bytes(data))
    log = PartitionLog(tmp_path, SMALL)
    assert log.recovered_bytes_truncated == 0
    assert len(all_batches(log)) == len(written + more)


def test_deleted_index_files_are_rebuilt(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 30, ts0=2_000)
    before = {
        s.base_offset: (list(s.offset_index.keys), list(s.time_index.keys)) for s in log.segments
    }
    log.close()
    for p in list(tmp_path.glob("*.index")) + list(tmp_path.glob("*.timeindex")):
        p.unlink()
    log = PartitionLog(tmp_path, SMALL)
    for seg in log.segments:
        assert seg.offset_index.path.exists() and seg.time_index.path.exists()
        assert list(seg.offset_index.keys) == before[seg.base_offset][0]
    assert all_batches(log) == written
    assert log.offset_for_timestamp(2_020) == (40, 2_020)


def test_corrupt_index_file_is_rebuilt(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 30)
    log.close()
    idx = sorted(tmp_path.glob("*.index"))[0]
    idx.write_bytes(idx.read_bytes()[:-3])  # partial entry
    (sorted(tmp_path.glob("*.index"))[1]).write_bytes(b"\x00\x00\x00\x05\x7f\x00\x00\x00")
    log = PartitionLog(tmp_path, SMALL)
    assert all_batches(log) == written
    for offset in range(60):
        assert offsets_of(log.read(offset, 1))[0] in (offset, offset - 1)


# -- deletion ------------------------------------------------------------------------


def test_delete_records_before(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    fill(log, 30)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 1
    assert log.delete_records_before(target) == target
    assert log.log_start_offset == target
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert read_offset(tmp_path / LOG_START_OFFSET_FILE) == target
    assert log.delete_records_before(5) == target  # never moves backwards
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(61)
    log.close()
    log = PartitionLog(tmp_path, SMALL)
    assert log.log_start_offset == target
    with pytest.raises(OffsetOutOfRange):
        log.read(target - 1, 100)
    # deleting up to the end rolls the active segment away
    assert log.delete_records_before(60) == 60
    assert [s.base_offset for s in log.segments] == [60]
    assert log.read(60, 100) == b""
    fill(log, 1)
    assert offsets_of(log.read(60, 100)) == [60]


def test_log_start_offset_survives_a_crash(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    fill(log, 30)
    log.delete_records_before(13)
    _crash_copy(log)
    assert PartitionLog(tmp_path, SMALL).log_start_offset == 13


def test_retention_by_time(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=100, retention_ms=1000)
    log = PartitionLog(tmp_path, cfg)
    fill(log, 30, ts0=10_000)  # timestamps 10_000..10_029
    n = len(log.segments)
    assert log.apply_retention(now_ms=10_500) == 0
    deleted = log.apply_retention(now_ms=100_000)
    assert deleted == n - 1  # never the active segment
    assert len(log.segments) == 1
    assert log.log_start_offset == log.segments[0].base_offset
    assert read_offset(tmp_path / LOG_START_OFFSET_FILE) == log.log_start_offset
    infinite = PartitionLog(tmp_path / "b", LogConfig(segment_bytes=1000, retention_ms=-1))
    fill(infinite, 30)
    assert infinite.apply_retention(now_ms=10**15) == 0


def test_retention_by_size(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=2500)
    log = PartitionLog(tmp_path, cfg)
    fill(log, 40)
    before = log.size_bytes
    assert log.apply_retention(now_ms=0) > 0
    assert log.size_bytes < before
    assert log.size_bytes - log.segments[0].size < 2500  # nothing more may go
    assert log.size_bytes >= 2500  # and it did not delete too much
    assert log.log_start_offset == log.segments[0].base_offset


def test_truncate_to(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, SMALL)
    written = fill(log, 30)
    log.truncate_to(41)  # inside the batch 40-41: the whole batch goes
    assert log.log_end_offset == 40
    assert all_batches(log) == written[:20]
    more = fill(log, 1)
    assert offsets_of(more[0]) == [40]
    log.close()
    log = PartitionLog(tmp_path, SMALL)
    assert all_batches(log) == written[:20] + more
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert len(log.segments) == 1


def test_checkpoint_roundtrip(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    assert read_offset(p) is None
    write_offset(p, 42)
    assert read_offset(p) == 42
    p.write_text("garbage")
    assert read_offset(p) is None


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", SMALL)
    fill(log, 3)
    log.delete()
    assert not (tmp_path / "p").exists()
