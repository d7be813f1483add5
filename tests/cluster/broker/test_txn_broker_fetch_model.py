"""Property test of read_committed fetches against a model of the log.

Random interleavings of transactional producers (commits, aborts, markers without a
transaction), idempotent and plain producers, segment rolls and reopens (clean, from an
older snapshot, or with snapshots and transaction indexes wiped). Then, for every fetch
offset, a consumer that filters the returned batches with the returned aborted list
exactly as Kafka's consumer does must see exactly the committed records below the LSO,
and every response's aborted list must be exactly the aborted transactions overlapping
the fetched range (KIP-98).
"""

from __future__ import annotations

import heapq
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.record_batch import BatchHeader, iter_batches, parse_control_record
from txnchaos.cluster.storage import LogConfig

CFG = LogConfig(segment_bytes=700, index_interval_bytes=100)
TOPIC_ID = uuid.UUID(int=5)
TXN_PIDS = (1, 2, 3)
IDEM_PID = 50


def open_partition(path: Path) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, CFG, clock=lambda: 1000.0)


@dataclass
class Model:
    leo: int = 0
    kinds: dict[int, str] = field(default_factory=dict)  # offset -> data/txn/control
    committed: set[int] = field(default_factory=set)
    open_txn: dict[int, list[int]] = field(default_factory=dict)  # pid -> data offsets
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # pid, first, last
    entries: list[tuple[int, int, int, int]] = field(default_factory=list)  # + LSO

    @property
    def lso(self) -> int:
        firsts = [offs[0] for offs in self.open_txn.values() if offs]
        return min(firsts) if firsts else self.leo

    def visible(self, start: int) -> list[int]:
        return [
            o
            for o in range(start, self.lso)
            if self.kinds[o] == "data" or (self.kinds[o] == "txn" and o in self.committed)
        ]

    def overlapping_aborts(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return sorted(
            (pid, first) for pid, first, last in self.aborted if last >= lo and first < hi
        )


def consume(batches: list[tuple[BatchHeader, bytes]], aborted: list[tuple[int, int]], start: int):
    """Kafka's CompletedFetch filtering for read_committed, one response at a time."""
    heap = [(first, pid) for pid, first in aborted]
    heapq.heapify(heap)
    aborted_pids: set[int] = set()
    out = []
    for h, raw in batches:
        if h.has_producer_id:
            while heap and heap[0][0] <= h.last_offset:
                aborted_pids.add(heapq.heappop(heap)[1])
            if h.is_control:
                commit, _ = parse_control_record(raw)
                if not commit:
                    aborted_pids.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in aborted_pids:
                continue
        out.extend(o for o in range(h.base_offset, h.next_offset) if o >= start)
    return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("txn"), st.sampled_from(TXN_PIDS), st.integers(1, 3)),
        st.tuples(st.just("plain"), st.integers(1, 3)),
        st.tuples(st.just("idem"), st.integers(1, 3)),
        st.tuples(st.just("end"), st.sampled_from(TXN_PIDS), st.booleans()),
        st.tuples(st.just("roll")),
        st.tuples(st.just("reopen"), st.integers(0, 2)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, max_bytes=st.sampled_from([1, 150, 400, 1 << 20]))
def test_read_committed_matches_model(ops: list[tuple], max_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d)
        part = open_partition(path)
        m = Model()
        seqs: dict[int, int] = {}
        for op in ops:
            kind = op[0]
            if kind in ("txn", "plain", "idem"):
                pid = op[1] if kind == "txn" else (IDEM_PID if kind == "idem" else -1)
                count = op[-1]
                seq = seqs.get(pid, 0) if pid >= 0 else -1
                raw = make_batch(
                    count,
                    producer_id=pid,
                    epoch=0 if pid >= 0 else -1,
                    base_sequence=seq,
                    transactional=kind == "txn",
                )
                r = part.append_records(raw)
                assert r.error_code == 0, r
                assert r.base_offset == m.leo
                if pid >= 0:
                    seqs[pid] = seq + count
                offsets = list(range(m.leo, m.leo + count))
                for o in offsets:
                    m.kinds[o] = "txn" if kind == "txn" else "data"
                if kind == "txn":
                    m.open_txn.setdefault(pid, []).extend(offsets)
                m.leo += count
            elif kind == "end":
                pid, commit = op[1], op[2]
                assert part.write_txn_marker(pid, 0, 0, commit) == 0
                offs = m.open_txn.pop(pid, [])
                if offs:
                    if commit:
                        m.committed.update(offs)
                    else:
                        m.aborted.append((pid, offs[0], m.leo))
                        m.entries.append((pid, offs[0], m.leo, m.lso if m.open_txn else m.leo + 1))
                m.kinds[m.leo] = "control"
                m.leo += 1
            elif kind == "roll":
                part.log.roll()
            else:
                part = _reopen(part, path, op[1])
            assert part.last_stable_offset == m.lso
            assert part.open_transaction_count == len(m.open_txn)
            entries = [
                (e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                for seg in part.log.segments
                for e in seg.txn_index.entries
            ]
            assert entries == m.entries

        assert part.high_watermark == m.leo
        for start in range(0, m.lso + 1):
            pos = start
            seen: list[int] = []
            while pos < m.lso:
                res = part.read(pos, max_bytes, isolation_level=1)
                assert res.error_code == 0 and res.last_stable_offset == m.lso
                batches = [(h, res.records[p : p + h.size]) for p, h in iter_batches(res.records)]
                assert batches, f"no data at {pos} below the LSO {m.lso}"
                upper = batches[-1][0].next_offset
                assert upper <= m.lso
                assert sorted(res.aborted_transactions) == m.overlapping_aborts(pos, upper)
                seen.extend(consume(batches, res.aborted_transactions, pos))
                pos = upper
            assert seen == m.visible(start)
        part.close()


def _reopen(part: Partition, path: Path, mode: int) -> Partition:
    if mode == 0:
        part.close()
        return open_partition(path)
    before = {p.name: p.read_bytes() for p in path.glob("*.txnindex")}
    part.log.close()  # as a crash: no snapshot at the log end
    if mode == 2:
        for p in [*path.glob("*.snapshot"), *path.glob("*.txnindex")]:
            p.unlink()
    again = open_partition(path)
    after = {p.name: p.read_bytes() for p in path.glob("*.txnindex")}
    assert after == before  # kept (mode 1) or rebuilt byte for byte (mode 2)
    if mode == 1:
        assert again.index_entries_restored == 0
    return again
