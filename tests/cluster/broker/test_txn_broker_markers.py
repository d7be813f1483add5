"""Transaction markers on a partition: LSO, producer state, fencing, the abort index."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.record_batch import iter_batches, parse_control_record
from txnchaos.cluster.storage import LogConfig

TOPIC_ID = uuid.UUID(int=99)
CFG = LogConfig(segment_bytes=2000, index_interval_bytes=200)
NOW_MS = 1_000_000
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52


def open_partition(path: Path, **kw: object) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, CFG, clock=lambda: NOW_MS / 1000, **kw)  # type: ignore[arg-type]


@pytest.fixture
def part(tmp_path: Path) -> Partition:
    return open_partition(tmp_path)


def txn(pid: int, seq: int, count: int = 1, epoch: int = 0, ts: int = 500) -> bytes:
    return make_batch(
        count, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=True, timestamp=ts
    )


def test_commit_marker_completes_the_transaction(part: Partition) -> None:
    part.append_records(make_batch(2))
    assert part.append_records(txn(1, 0, 2)).base_offset == 2
    part.append_records(make_batch(1))
    assert (part.high_watermark, part.last_stable_offset, part.open_transaction_count) == (5, 2, 1)
    assert part.oldest_open_transaction_start_ms == 500

    assert part.write_txn_marker(1, 0, 3, True) == 0
    assert (part.high_watermark, part.last_stable_offset, part.open_transaction_count) == (6, 6, 0)
    assert part.oldest_open_transaction_start_ms == -1
    entry = part.producer_state.last_entry(1)
    assert entry is not None
    assert (entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_timestamp) == (
        None,
        3,
        NOW_MS,
    )
    res = part.read(0, 1 << 20, isolation_level=1)
    headers = [h for _, h in iter_batches(res.records)]
    assert [h.base_offset for h in headers] == [0, 2, 4, 5]
    marker = headers[-1]
    assert marker.is_control and marker.is_transactional and marker.producer_id == 1
    assert parse_control_record(res.records[-marker.size :]) == (True, 3)
    assert res.aborted_transactions == []
    assert not list(part.directory.glob("*.txnindex"))  # commits are not indexed


def test_abort_marker_is_indexed_and_returned_to_read_committed(part: Partition) -> None:
    part.append_records(txn(7, 0, 3))
    part.append_records(make_batch(1))
    assert part.write_txn_marker(7, 0, 0, False) == 0
    assert part.last_stable_offset == part.high_watermark == 5
    index = part.directory / "00000000000000000000.txnindex"
    assert index.exists()
    assert part.read(0, 1 << 20, isolation_level=1).aborted_transactions == [(7, 0)]
    # read_uncommitted gets no aborted list (the fetch handler sends null)
    assert part.read(0, 1 << 20).aborted_transactions == []
    # a fetch starting after the aborted transaction does not get it
    assert part.read(5, 1 << 20, isolation_level=1).records == b""


def test_index_entry_layout_is_exactly_the_seed_schema(part: Partition) -> None:
    """TransactionEntry => Version i16, PID i64, FirstOffset i64, LastOffset i64,
    LastStableOffset i64 (big-endian, 34 bytes)."""
    part.append_records(make_batch(2))  # 0-1
    part.append_records(txn(0x0102030405060708, 0, 2))  # 2-3, pid with distinct bytes
    part.append_records(txn(9, 0, 1))  # 4, stays open
    assert part.write_txn_marker(0x0102030405060708, 0, 0, False) == 0  # marker at 5
    raw = (part.directory / "00000000000000000000.txnindex").read_bytes()
    assert raw == bytes.fromhex(
        "0000"  # version 0
        "0102030405060708"  # producer id
        "0000000000000002"  # first offset
        "0000000000000005"  # last offset (the abort marker)
        "0000000000000004"  # LSO once complete: first offset of the other open txn
    )
    assert part.write_txn_marker(9, 0, 0, False) == 0  # marker at 6, nothing else open
    raw = (part.directory / "00000000000000000000.txnindex").read_bytes()
    assert len(raw) == 68
    assert raw[34:] == bytes.fromhex(
        "00000000000000000009000000000000000400000000000000060000000000000007"
    )


def test_seed_example(part: Partition) -> None:
    """The data log, index and both fetches of KIP-98's example (LSOs here are
    Kafka's exclusive ones: the seed's value + 1)."""
    p1, p2 = 1, 2
    seq = {p1: 0, p2: 0}

    def data(pid: int) -> None:
        assert part.append_records(txn(pid, seq[pid])).error_code == 0
        seq[pid] += 1

    data(p1)  # 0
    data(p1)  # 1
    data(p2)  # 2
    assert part.write_txn_marker(p1, 0, 0, True) == 0  # 3 C
    data(p2)  # 4
    assert part.write_txn_marker(p2, 0, 0, False) == 0  # 5 A
    data(p1)  # 6
    data(p2)  # 7
    data(p1)  # 8
    assert part.write_txn_marker(p1, 0, 0, False) == 0  # 9 A
    assert part.write_txn_marker(p2, 0, 0, True) == 0  # 10 C
    entries = [
        (e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
        for e in part.log.active_segment.txn_index.entries
    ]
    assert entries == [(p2, 2, 5, 6), (p1, 6, 9, 7)]
    whole = part.read(0, 1 << 20, isolation_level=1).records
    sizes = {h.base_offset: h.size for _, h in iter_batches(whole)}
    first_five = sum(sizes[o] for o in range(5))
    fetch1 = part.read(0, first_five, isolation_level=1)
    assert [h.base_offset for _, h in iter_batches(fetch1.records)] == [0, 1, 2, 3, 4]
    assert fetch1.aborted_transactions == [(p2, 2)]
    fetch2 = part.read(5, sum(sizes[o] for o in range(5, 9)), isolation_level=1)
    assert [h.base_offset for _, h in iter_batches(fetch2.records)] == [5, 6, 7, 8]
    assert fetch2.aborted_transactions == [(p2, 2), (p1, 6)]


def test_stale_producer_epoch_is_fenced(part: Partition) -> None:
    part.append_records(txn(1, 0, epoch=0))
    part.append_records(txn(1, 0, epoch=1))  # epoch bump (a new transaction of a new epoch)
    assert part.write_txn_marker(1, 0, 0, False) == INVALID_PRODUCER_EPOCH
    assert part.log_end_offset == 2 and part.last_stable_offset == 0
    assert part.write_txn_marker(1, 1, 0, False) == 0
    assert part.last_stable_offset == part.high_watermark == 3


def test_tv2_markers_need_a_bumped_epoch(part: Partition) -> None:
    part.append_records(txn(1, 0, epoch=4))
    # TV2: the coordinator bumps the epoch before writing the marker
    assert part.write_txn_marker(1, 4, 0, True, transaction_version=2) == INVALID_PRODUCER_EPOCH
    assert part.write_txn_marker(1, 5, 0, True, transaction_version=2) == 0
    assert part.last_stable_offset == 2
    # a retried marker (same epoch, no open transaction) is written again
    assert part.write_txn_marker(1, 5, 0, True, transaction_version=2) == 0
    assert part.log_end_offset == 3
    # the next transaction writes with the bumped epoch, from sequence 0
    assert part.append_records(txn(1, 0, epoch=5)).base_offset == 3
    assert part.write_txn_marker(1, 5, 0, False, transaction_version=2) == INVALID_PRODUCER_EPOCH
    assert part.write_txn_marker(1, 4, 0, False, transaction_version=2) == INVALID_PRODUCER_EPOCH
    assert part.write_txn_marker(1, 6, 0, False, transaction_version=2) == 0
    assert part.read(0, 1 << 20, isolation_level=1).aborted_transactions == [(1, 3)]


def test_coordinator_epoch_fencing(part: Partition) -> None:
    part.append_records(txn(1, 0))
    assert part.write_txn_marker(1, 0, 5, True) == 0
    part.append_records(txn(1, 1))
    assert part.write_txn_marker(1, 0, 4, True) == TRANSACTION_COORDINATOR_FENCED
    assert part.last_stable_offset == 2
    assert part.write_txn_marker(1, 0, 5, True) == 0  # same coordinator epoch is fine
    assert part.last_stable_offset == part.high_watermark == 4


def test_marker_without_open_transaction_is_written(part: Partition) -> None:
    part.append_records(txn(2, 0))  # another producer's open transaction
    assert part.write_txn_marker(99, 3, 1, False) == 0  # no state at all for 99
    assert part.log_end_offset == 2
    assert part.last_stable_offset == 0  # completes nothing
    e = part.producer_state.last_entry(99)
    assert e is not None and (e.producer_epoch, e.coordinator_epoch) == (3, 1)
    assert not list(part.directory.glob("*.txnindex"))
    assert part.producer_count == 2


def test_lso_is_the_oldest_open_transaction(part: Partition) -> None:
    part.append_records(txn(1, 0))  # 0
    part.append_records(txn(2, 0))  # 1
    part.append_records(txn(3, 0))  # 2
    assert part.last_stable_offset == 0
    assert part.write_txn_marker(2, 0, 0, False) == 0  # 3
    assert part.last_stable_offset == 0
    assert part.write_txn_marker(1, 0, 0, True) == 0  # 4
    assert part.last_stable_offset == 2 and part.open_transaction_count == 1
    assert part.list_offset(-1, isolation_level=1) == (0, 2, -1)
    committed = part.read(0, 1 << 20, isolation_level=1)
    assert [h.base_offset for _, h in iter_batches(committed.records)] == [0, 1]
    assert committed.aborted_transactions == [(2, 1)]
    # the entry's LSO is the first offset of the oldest *other* open transaction
    (entry,) = part.log.active_segment.txn_index.entries
    assert entry.last_stable_offset == 0
    assert part.write_txn_marker(3, 0, 0, True) == 0
    assert part.last_stable_offset == part.high_watermark == 6


def test_open_transaction_is_never_expired_and_state_survives_its_records(
    part: Partition,
) -> None:
    part.append_records(txn(1, 0, ts=10))
    part.append_records(make_batch(1, producer_id=2, epoch=0, base_sequence=0, timestamp=10))
    far = 10 + 10 * 86_400_000
    assert part.remove_expired_producers(far) == [2]
    assert part.producer_state.last_entry(1) is not None  # open transaction
    assert part.write_txn_marker(1, 0, 0, True) == 0  # marker timestamp: NOW_MS
    # KIP-360: state outlives the records (DeleteRecords) until producer.id.expiration.ms
    part.delete_records(-1)
    assert part.remove_expired_producers(NOW_MS + 86_400_000 - 1) == []
    assert part.append_records(txn(1, 1)).error_code == 0
    assert part.write_txn_marker(1, 0, 0, True) == 0
    assert part.remove_expired_producers(NOW_MS + 86_400_000) == [1]


def test_metrics_properties(part: Partition) -> None:
    part.append_records(txn(1, 0, ts=111))
    part.append_records(txn(2, 0, ts=222))
    part.append_records(txn(1, 1, ts=333))
    assert part.open_transaction_count == 2
    assert part.producer_count == 2
    assert part.oldest_open_transaction_start_ms == 111
    assert part.oldest_open_transaction_last_timestamp_ms == 333
    assert part.last_stable_offset == 0
    part.write_txn_marker(1, 0, 0, True)
    assert part.oldest_open_transaction_start_ms == 222
    assert part.last_stable_offset == 1
