"""The torn tail a power loss leaves (harness/faults/torn_tail.py): each piece really is
damaged (a batch whose CRC fails, half an aborted-index entry, an empty snapshot, a frame cut
short), and the node's own recovery cuts it off and serves exactly what was written before."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.record_batch import crc_ok, iter_batches
from txnchaos.cluster.storage import LogConfig
from txnchaos.cluster.storage.state_log import Record, StateLog
from txnchaos.harness.faults.torn_tail import (
    TXNINDEX_ENTRY,
    tear_node,
    tear_partition,
    torn_batch,
)
from txnchaos.harness.nemesis.faults.torn_write import summary

TOPIC_ID = uuid.UUID(int=37)
CFG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def open_partition(path: Path) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, CFG, clock=lambda: 1000.0)


def fill(path: Path) -> Partition:
    """Transactions of two producers, half aborted, over several segments; producer 2's
    last transaction is left open."""
    p = open_partition(path)
    seq = {1: 0, 2: 0}
    for i in range(12):
        for pid in (1, 2):
            raw = make_batch(
                2, producer_id=pid, epoch=0, base_sequence=seq[pid], transactional=True
            )
            assert p.append_records(raw).error_code == 0
            seq[pid] += 2
        assert p.write_txn_marker(1, 0, 0, i % 2 == 0) == 0
        if i < 11:
            assert p.write_txn_marker(2, 0, 0, i % 2 == 1) == 0
    return p


def state(p: Partition) -> tuple[int, int, bytes, list[tuple[int, int, int, int]]]:
    """Log end, LSO, every byte a read returns, and the aborted-index entries."""
    data = b""
    offset = p.log_start_offset
    while offset < p.log_end_offset:
        res = p.read(offset, 1 << 20)
        assert res.error_code == 0 and res.records
        data += bytes(res.records)
        for _, h in iter_batches(res.records):
            offset = h.next_offset
    entries = [
        (e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
        for seg in p.log.segments
        for e in seg.txn_index.entries
    ]
    return p.log_end_offset, p.last_stable_offset, data, entries


def test_torn_batch_is_the_next_offset_with_a_broken_crc() -> None:
    segment = make_batch(3, producer_id=1, epoch=0, base_sequence=0, base_offset=5)
    torn = torn_batch(segment)
    assert torn is not None and len(torn) == len(segment)
    ((pos, header),) = list(iter_batches(segment + torn))[1:]
    assert header.base_offset == 8
    assert not crc_ok(segment + torn, pos, header)
    assert torn_batch(b"") is None


def test_partition_recovers_exactly_what_was_written(tmp_path: Path) -> None:
    p = fill(tmp_path)
    assert len(p.log.segments) > 2
    before = state(p)
    assert before[3], "no aborted transaction indexed"
    p.close()
    sizes = {f.name: f.stat().st_size for f in tmp_path.iterdir()}
    done = tear_partition(tmp_path)
    kinds = " ".join(done)
    assert "torn" in kinds and "half an entry" in kinds and "emptied" in kinds, done
    active = max(tmp_path.glob("*.log"))
    assert active.stat().st_size > sizes[active.name]
    index = active.with_suffix(".txnindex")
    if index.name in sizes:
        assert index.stat().st_size == sizes[index.name] + TXNINDEX_ENTRY // 2
    assert any(f.stat().st_size == 0 for f in tmp_path.glob("*.snapshot"))

    q = open_partition(tmp_path)
    assert state(q) == before
    # producer state came back without the lost snapshot: producer 2's transaction is still
    # open, and both producers go on at their next sequence
    assert q.open_transaction_count == 1
    for pid in (1, 2):
        raw = make_batch(1, producer_id=pid, epoch=0, base_sequence=24, transactional=True)
        assert q.append_records(raw).error_code == 0
    gap = make_batch(1, producer_id=1, epoch=0, base_sequence=26, transactional=True)
    assert q.append_records(gap).error_code != 0
    q.close()


def test_tear_node_tears_partitions_and_state_logs(tmp_path: Path) -> None:
    node = tmp_path / "node"
    fill(node / "partitions" / "t-0").close()
    log_path = node / "transactions" / "0.log"
    log = StateLog(log_path)
    log.append(Record(b"txn-a", b"ongoing"))
    log.append(Record(b"txn-b", b"complete"))
    log.close()
    size = log_path.stat().st_size
    done = tear_node(node)
    assert any(line.startswith("t-0:") for line in done)
    assert any(line.startswith("transactions/0.log") for line in done)
    assert log_path.stat().st_size > size
    again = StateLog(log_path)
    assert again.load() == {b"txn-a": b"ongoing", b"txn-b": b"complete"}
    assert again.size == size  # the torn frame was cut off
    again.close()


def test_the_fault_log_counts_what_was_torn(tmp_path: Path) -> None:
    node = tmp_path / "node"
    fill(node / "partitions" / "t-0").close()
    fill(node / "partitions" / "t-1").close()
    assert summary(tear_node(node)) == "2 batches, 2 index entries, 2 snapshots"
    assert summary([]) == "nothing to tear"


def test_an_apache_kafka_log_directory_is_torn_partition_by_partition(tmp_path: Path) -> None:
    """Apache Kafka keeps each partition directly in its log directory (``events-0``,
    ``__transaction_state-7``), in the same segment, aborted-index and snapshot formats."""
    data = tmp_path / "data"
    fill(data / "events-0").close()
    fill(data / "__transaction_state-7").close()
    (data / "meta.properties").write_text("node.id=1\n")
    (data / "not-a-partition").mkdir()
    done = tear_node(data)
    assert summary(done) == "2 batches, 2 index entries, 2 snapshots"
    assert {line.split(":")[0] for line in done} == {"events-0", "__transaction_state-7"}
