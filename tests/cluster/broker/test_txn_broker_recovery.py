"""The aborted-transaction index and the LSO across crashes, truncation and retention."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.record_batch import (
    build_control_batch,
    iter_batches,
    parse_control_record,
)
from txnchaos.cluster.storage import LogConfig

TOPIC_ID = uuid.UUID(int=11)
CFG = LogConfig(segment_bytes=1500, index_interval_bytes=200)

CHILD = textwrap.dedent(
    """
    import random, sys, uuid
    from pathlib import Path
    sys.path.insert(0, {helpers!r})
    from tests.cluster.record_batches import make_batch
    from txnchaos.cluster.broker.partition import Partition
    from txnchaos.cluster.storage import LogConfig

    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=200)
    part = Partition("t", uuid.UUID(int=11), 0, Path({directory!r}), cfg)
    rng = random.Random(7)
    seqs = {{}}
    for i in range(1_000_000):
        pid = rng.choice((1, 2, 3, 4))
        if rng.random() < 0.3 and pid in seqs:
            code = part.write_txn_marker(pid, 0, 0, rng.random() < 0.5)
            assert code == 0, code
            line = "M"
        else:
            seq = seqs.get(pid, 0)
            raw = make_batch(1 + i % 2, producer_id=pid, epoch=0, base_sequence=seq,
                             transactional=True, value_size=30)
            result = part.append_records(raw)
            assert result.error_code == 0, result
            seqs[pid] = seq + 1 + i % 2
            line = "D"
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()
    """
)


def open_partition(path: Path, cfg: LogConfig = CFG) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, cfg, clock=lambda: 1000.0)


def txn(pid: int, seq: int, count: int = 1) -> bytes:
    return make_batch(count, producer_id=pid, epoch=0, base_sequence=seq, transactional=True)


def entries(part: Partition) -> list[tuple[int, int, int, int]]:
    return [
        (e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
        for seg in part.log.segments
        for e in seg.txn_index.entries
    ]


def model_from_log(part: Partition) -> tuple[list[tuple[int, int, int, int]], int]:
    """(index entries, LSO) derived from the batches of the whole log."""
    open_txn: dict[int, int] = {}
    expected = []
    offset = part.log_start_offset
    while offset < part.log_end_offset:
        res = part.read(offset, 1 << 20)
        assert res.error_code == 0 and res.records
        for pos, h in iter_batches(res.records):
            if h.is_control:
                commit, _ = parse_control_record(res.records[pos : pos + h.size])
                first = open_txn.pop(h.producer_id, None)
                if first is not None and not commit:
                    lso = min(open_txn.values()) if open_txn else h.base_offset + 1
                    expected.append((h.producer_id, first, h.base_offset, lso))
            elif h.is_transactional:
                open_txn.setdefault(h.producer_id, h.base_offset)
            offset = h.next_offset
    return expected, min(open_txn.values()) if open_txn else part.log_end_offset


def _read_lines(proc: subprocess.Popen[bytes], want: int) -> None:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    while buf.count(b"\n") < want:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, "child produced no acknowledgement within 60 s"
        chunk = os.read(fd, 65536)
        assert chunk, "child exited early"
        buf += chunk


def test_sigkill_then_recovery_rebuilds_index_and_lso(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    code = CHILD.format(helpers=str(Path(__file__).resolve().parents[3]), directory=str(directory))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        _read_lines(proc, 600)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.stdout is not None
        proc.stdout.close()
    part = open_partition(directory)
    assert len(part.log.segments) > 3
    expected, lso = model_from_log(part)
    assert len(expected) > 10
    assert entries(part) == expected
    assert part.last_stable_offset == lso
    part.log.close()
    # and the same from the log alone: no snapshots, no transaction indexes
    for p in [*directory.glob("*.snapshot"), *directory.glob("*.txnindex")]:
        p.unlink()
    again = open_partition(directory)
    assert entries(again) == expected
    assert again.last_stable_offset == lso
    assert again.index_entries_restored == len(expected)
    again.close()


def test_marker_without_its_index_entry_is_restored_on_open(tmp_path: Path) -> None:
    """A crash between the marker append and the index append."""
    p = open_partition(tmp_path)
    p.append_records(txn(1, 0, 2))
    p.append_records(txn(2, 0))
    assert p.write_txn_marker(1, 0, 0, False) == 0  # indexed
    p.append_records(txn(1, 2))
    p.take_snapshot()
    p.log.append(build_control_batch(1, 0, 0, False, 5), p.log_end_offset)  # not indexed
    p.log.close()
    q = open_partition(tmp_path)
    assert q.index_entries_restored == 1
    assert entries(q) == [(1, 0, 3, 2), (1, 4, 5, 2)]
    assert q.last_stable_offset == 2
    assert q.read(0, 1 << 20, isolation_level=1).aborted_transactions == [(1, 0)]


def test_torn_index_tail_is_cut(tmp_path: Path) -> None:
    p = open_partition(tmp_path)
    p.append_records(txn(1, 0))
    p.write_txn_marker(1, 0, 0, False)
    p.close()
    index = tmp_path / "00000000000000000000.txnindex"
    with index.open("ab") as f:
        f.write(b"\x00\x00\x01\x02\x03")
    q = open_partition(tmp_path)
    assert entries(q) == [(1, 0, 1, 2)]
    assert index.stat().st_size == 34


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    p = open_partition(tmp_path)
    p.append_records(txn(1, 0))  # 0
    p.append_records(txn(2, 0))  # 1
    p.write_txn_marker(1, 0, 0, False)  # 2
    p.write_txn_marker(2, 0, 0, False)  # 3
    assert [e[2] for e in entries(p)] == [2, 3]
    p.truncate_to(3)
    assert entries(p) == [(1, 0, 2, 1)]
    assert p.last_stable_offset == 1  # producer 2's transaction is open again
    p.truncate_to(2)
    assert entries(p) == [] and not list(tmp_path.glob("*.txnindex"))
    assert p.last_stable_offset == 0 and p.open_transaction_count == 2
    assert p.write_txn_marker(1, 0, 0, True) == 0
    assert p.last_stable_offset == 1


def test_retention_deletes_index_files_but_keeps_producer_state(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=400, index_interval_bytes=100, retention_bytes=500)
    p = open_partition(tmp_path, cfg)
    for i in range(6):
        assert p.append_records(txn(1, 2 * i, 2)).error_code == 0
        assert p.write_txn_marker(1, 0, 0, False) == 0
    files = sorted(x.name for x in tmp_path.glob("*.txnindex"))
    assert len(files) >= 3
    bases = [s.base_offset for s in p.log.segments]
    assert p.apply_retention(0) > 0
    kept = {s.base_offset for s in p.log.segments}
    assert kept != set(bases)
    for base in bases:
        exists = (tmp_path / f"{base:020d}.txnindex").exists()
        assert exists == (base in kept and bool(p.log.segment_for(base).txn_index.entries))
    assert p.log_start_offset == min(kept)
    # aborted transactions of deleted segments are gone; the rest still answer fetches
    start = p.log_start_offset
    got = []
    while start < p.log_end_offset:  # one segment per read
        res = p.read(start, 1 << 20, isolation_level=1)
        got += [t for t in res.aborted_transactions if t not in got]
        start = [h for _, h in iter_batches(res.records)][-1].next_offset
    # transaction k holds offsets 3k, 3k+1 and its abort marker at 3k+2
    assert got == [(1, 3 * k) for k in range(6) if 3 * k + 2 >= p.log_start_offset]
    assert got
    # KIP-360: the producer's state outlives its records
    assert p.producer_state.last_entry(1) is not None
    p.close()
    q = open_partition(tmp_path, cfg)
    assert q.append_records(txn(1, 12)).error_code == 0  # sequence continues
    assert q.last_stable_offset == q.log_end_offset - 1


def test_orphan_index_file_is_removed(tmp_path: Path) -> None:
    p = open_partition(tmp_path)
    p.append_records(make_batch(1))
    p.close()
    orphan = tmp_path / f"{5:020d}.txnindex"
    orphan.write_bytes(b"\x00" * 34)
    open_partition(tmp_path).close()
    assert not orphan.exists()
