from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition, TopicIdMismatch
from txnchaos.cluster.protocol.record_batch import build_control_batch, iter_batches
from txnchaos.cluster.storage import LogConfig

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
CFG = LogConfig(segment_bytes=2000, index_interval_bytes=200, max_message_bytes=1500)


def open_partition(path: Path, **kw: object) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, CFG, clock=lambda: 1000.0, **kw)  # type: ignore[arg-type]


@pytest.fixture
def part(tmp_path: Path) -> Partition:
    return open_partition(tmp_path)


def idem(seq: int, count: int = 1, pid: int = 7, epoch: int = 0, **kw: object) -> bytes:
    return make_batch(count, producer_id=pid, epoch=epoch, base_sequence=seq, **kw)  # type: ignore[arg-type]


def test_append_and_read(part: Partition) -> None:
    r = part.append_records(make_batch(3))
    assert (r.error_code, r.base_offset, r.last_offset, r.log_start_offset) == (0, 0, 2, 0)
    assert r.log_append_time == -1 and r.record_errors == []
    r = part.append_records(make_batch(2))
    assert (r.base_offset, r.last_offset) == (3, 4)
    res = part.read(1, 1 << 20)
    assert res.error_code == 0
    assert [h.base_offset for _, h in iter_batches(res.records)] == [0, 3]
    assert [h.partition_leader_epoch for _, h in iter_batches(res.records)] == [0, 0]
    assert (res.high_watermark, res.last_stable_offset, res.log_start_offset) == (5, 5, 0)
    assert res.aborted_transactions == []
    assert part.read(6, 100).error_code == 1
    assert (part.log_end_offset, part.producer_count) == (5, 0)
    assert part.size_bytes == len(make_batch(3)) + len(make_batch(2))


def _with(raw: bytes, fmt: str, pos: int, value: int) -> bytes:
    buf = bytearray(raw)
    struct.pack_into(fmt, buf, pos, value)
    return bytes(buf)


@pytest.mark.parametrize(
    ("records", "code", "has_log_start"),
    [
        (b"", 87, True),
        (make_batch(1) + make_batch(1), 87, True),  # two batches
        (make_batch(1, magic=1), 43, True),
        (make_batch(1)[:40], 2, False),
        (make_batch(2)[:-1], 2, False),  # truncated
        (_with(make_batch(1), ">i", 8, 20), 2, False),  # length below the minimum
        (_with(make_batch(1), ">B", 70, 0x55), 2, False),  # CRC
        (make_batch(1, value_size=1600), 10, False),
        (make_batch(2, records_count=3), 87, True),
        (make_batch(1, records_count=0, last_offset_delta=-1), 87, True),
        (make_batch(1, attributes=0x20), 87, True),  # client control batch
        (make_batch(1, base_offset=5), 87, True),
        (make_batch(1, producer_id=3, epoch=0, base_sequence=-1), 87, True),
        (make_batch(1, transactional=True), 87, True),  # transactional without producer id
    ],
)
def test_append_validation_errors(
    part: Partition, records: bytes, code: int, has_log_start: bool
) -> None:
    part.append_records(make_batch(1))
    r = part.append_records(records)
    assert r.error_code == code, r.error_message
    assert r.error_message
    assert (r.base_offset, r.last_offset) == (-1, -1)
    assert r.log_start_offset == (0 if has_log_start else -1)
    assert part.log_end_offset == 1


def test_record_list_too_large(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=200, max_message_bytes=10_000)
    p = Partition("t", TOPIC_ID, 0, tmp_path, cfg)
    assert p.append_records(make_batch(1, value_size=300)).error_code == 18


def test_idempotent_produce(part: Partition) -> None:
    assert part.append_records(idem(0, 2)).base_offset == 0
    assert part.append_records(idem(2, 2)).base_offset == 2
    retry = part.append_records(idem(0, 2))
    assert (retry.error_code, retry.base_offset, retry.last_offset, retry.duplicate) == (
        0,
        0,
        1,
        True,
    )
    assert part.log_end_offset == 4
    assert part.append_records(idem(5)).error_code == 45
    assert part.append_records(idem(4, epoch=1)).error_code == 45
    assert part.append_records(idem(0, epoch=1)).base_offset == 4
    assert part.append_records(idem(1, epoch=0)).error_code == 47
    # A producer the partition has no state for may start at any sequence (Kafka >= 2.5).
    assert part.append_records(idem(3, pid=99)).base_offset == 5
    assert part.producer_count == 2


def test_lso_follows_open_transactions(part: Partition) -> None:
    part.append_records(make_batch(2))
    part.append_records(idem(0, 2, pid=1, transactional=True))
    part.append_records(make_batch(2))
    assert (part.high_watermark, part.last_stable_offset) == (6, 2)
    committed = part.read(0, 1 << 20, isolation_level=1)
    assert [h.base_offset for _, h in iter_batches(committed.records)] == [0]
    assert committed.last_stable_offset == 2
    assert part.list_offset(-1, isolation_level=1) == (0, 2, -1)
    assert part.list_offset(-1) == (0, 6, -1)
    assert part.append_records(idem(2, pid=1)).error_code == 48  # non-txn inside a txn


def test_max_timestamp_past_the_lso_is_not_listed_read_committed(part: Partition) -> None:
    """Kafka filters every timestamp target, max timestamp included, by what the isolation
    level may read: the newest record in an open transaction is not listed read_committed."""
    part.append_records(make_batch(2, timestamp=100))
    part.append_records(idem(0, 2, pid=1, transactional=True))  # offsets 2-3, open
    assert part.last_stable_offset == 2
    error, offset, _ = part.list_offset(-3)
    assert error == 0 and offset >= 2  # read_uncommitted: in the open transaction
    assert part.list_offset(-3, isolation_level=1) == (0, -1, -1)


def test_list_offset(part: Partition) -> None:
    assert part.list_offset(-3) == (0, -1, -1)
    assert part.list_offset(0) == (0, -1, -1)
    for ts in (100, 300, 200):
        part.append_records(make_batch(2, timestamp=ts))
    assert part.list_offset(-2) == (0, 0, -1)
    assert part.list_offset(-1) == (0, 6, -1)
    assert part.list_offset(-3) == (0, 2, 300)
    assert part.list_offset(150) == (0, 2, 300)
    assert part.list_offset(50) == (0, 0, 100)
    assert part.list_offset(301) == (0, -1, -1)
    part.delete_records(3)
    assert part.list_offset(-2) == (0, 3, -1)
    assert part.list_offset(50) == (0, 3, 300)


def test_delete_records(part: Partition) -> None:
    for _ in range(30):
        part.append_records(make_batch(2, value_size=50))
    assert part.delete_records(61) == (1, -1)
    assert part.delete_records(-5) == (1, -1)
    assert part.delete_records(10) == (0, 10)
    assert part.log_start_offset == 10
    assert part.read(9, 100).error_code == 1
    assert part.delete_records(-1) == (0, 60)
    assert part.read(60, 100).records == b""


def test_producer_state_retained_after_delete_records(part: Partition) -> None:
    """KIP-360: state outlives the records; a retry is still deduplicated."""
    part.append_records(idem(0, 2))
    part.delete_records(-1)
    assert part.producer_count == 1
    assert part.append_records(idem(0, 2)).duplicate
    assert part.append_records(idem(2)).base_offset == 2
    part.close()
    again = open_partition(part.directory)
    assert again.append_records(idem(3)).base_offset == 3


def test_reopen_rebuilds_producer_state(tmp_path: Path) -> None:
    p = open_partition(tmp_path)
    for seq in range(0, 20, 2):
        p.append_records(idem(seq, 2, value_size=80))
    p.append_records(idem(0, 1, pid=8, transactional=True))
    state = {
        pid: (e.producer_epoch, list(e.batches)) for pid, e in p.producer_state.producers.items()
    }
    p.close()
    for wipe_snapshots in (False, True):
        if wipe_snapshots:
            for snap in tmp_path.glob("*.snapshot"):
                snap.unlink()
        q = open_partition(tmp_path)
        got = {
            pid: (e.producer_epoch, list(e.batches))
            for pid, e in q.producer_state.producers.items()
        }
        assert got == state
        assert q.last_stable_offset == 20
        assert q.append_records(idem(16, 2)).duplicate
        q.log.close()  # no new snapshot: the next round rebuilds from the log alone


def test_markers_in_the_log_are_replayed(tmp_path: Path) -> None:
    p = open_partition(tmp_path)
    p.append_records(idem(0, 2, pid=5, transactional=True))
    assert p.last_stable_offset == 0
    marker = build_control_batch(5, 0, 3, True, 1234)
    p.log.append(marker, p.log_end_offset)  # what the marker writer will do
    p.log.close()
    q = open_partition(tmp_path)
    assert q.last_stable_offset == q.high_watermark == 3
    e = q.producer_state.last_entry(5)
    assert e is not None and e.coordinator_epoch == 3 and e.current_txn_first_offset is None


def test_topic_id_mismatch(tmp_path: Path) -> None:
    open_partition(tmp_path).close()
    with pytest.raises(TopicIdMismatch):
        Partition("t", uuid.uuid4(), 0, tmp_path, CFG)
    assert (
        "topic_id: 12345678-1234-5678-1234-567812345678"
        in (tmp_path / "partition.metadata").read_text()
    )


def test_truncate_rebuilds_producer_state(part: Partition) -> None:
    for seq in range(4):
        part.append_records(idem(seq))
    part.truncate_to(2)
    assert part.log_end_offset == 2
    assert part.append_records(idem(3)).error_code == 45
    assert part.append_records(idem(2)).base_offset == 2
