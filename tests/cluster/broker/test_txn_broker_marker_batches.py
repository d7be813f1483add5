"""Markers written together (``Partition.write_txn_markers``, the WriteTxnMarkers API):
the same log, producer state and answers as writing them one by one, in fewer writes."""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition, TxnMarker
from txnchaos.cluster.broker.txn_markers_api import WriteTxnMarkersApi
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.server.dispatch import RequestContext
from txnchaos.cluster.storage import LogConfig
from txnchaos.cluster.storage import segment as segment_module

TOPIC_ID = uuid.UUID(int=7)
NOW_MS = 1_000_000
PIDS = (1, 2, 3)


def open_partition(path: Path, cfg: LogConfig) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, cfg, clock=lambda: NOW_MS / 1000)


def txn(pid: int, seq: int, epoch: int = 0) -> bytes:
    return make_batch(1, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=True)


def state_of(part: Partition) -> Any:
    """Everything a marker changes: the log's bytes and segments, the producer state,
    the LSO, the abort index and what a read_committed fetch returns."""
    log = part.log
    data = b"".join(seg.read_at(0, seg.size) for seg in log.segments)
    producers = {
        pid: (e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset, e.last_timestamp)
        for pid, e in part.producer_state.producers.items()
    }
    read = part.read(0, 1 << 20, isolation_level=1)
    return (
        data,
        [(s.base_offset, s.size, s.next_offset) for s in log.segments],
        [(list(s.offset_index.keys), list(s.offset_index.values)) for s in log.segments],
        producers,
        part.last_stable_offset,
        read.aborted_transactions,
    )


# A step: open a transaction (a data batch), or a request's worth of markers.
opens = st.tuples(st.just("open"), st.sampled_from(PIDS))
marker = st.builds(
    TxnMarker,
    producer_id=st.sampled_from(PIDS),
    producer_epoch=st.integers(0, 2),
    coordinator_epoch=st.integers(0, 2),
    commit=st.booleans(),
    transaction_version=st.sampled_from([0, 2]),
)
requests = st.tuples(st.just("markers"), st.lists(marker, min_size=1, max_size=6))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.one_of(opens, requests), max_size=12),
    segment_bytes=st.sampled_from([300, 600, 100_000]),
)
def test_markers_together_equal_markers_one_by_one(
    steps: list[tuple[str, Any]], segment_bytes: int
) -> None:
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=150)
    with tempfile.TemporaryDirectory() as d:
        together = open_partition(Path(d) / "together", cfg)
        alone = open_partition(Path(d) / "alone", cfg)
        seqs = dict.fromkeys(PIDS, 0)
        epochs = dict.fromkeys(PIDS, 0)
        for kind, arg in steps:
            if kind == "open":
                batch = txn(arg, seqs[arg], epochs[arg])
                a, b = together.append_records(batch), alone.append_records(batch)
                assert (a.error_code, a.base_offset) == (b.error_code, b.base_offset)
                if a.error_code == 0:
                    seqs[arg] += 1
                continue
            codes = together.write_txn_markers(arg)
            assert codes == [alone.write_txn_marker(*m) for m in arg]
            for m, code in zip(arg, codes, strict=True):
                if code == 0 and m.producer_epoch != epochs[m.producer_id]:
                    epochs[m.producer_id], seqs[m.producer_id] = m.producer_epoch, 0
            assert state_of(together) == state_of(alone)
        together.close()
        alone.close()


def _count_pwrites(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.pwrite

    def pwrite(fd: int, data: Any, offset: int) -> int:
        calls.append(len(data))
        return real(fd, data, offset)

    monkeypatch.setattr(segment_module.os, "pwrite", pwrite)
    return calls


def test_markers_of_different_producers_go_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = open_partition(tmp_path, LogConfig())
    for pid in PIDS:
        part.append_records(txn(pid, 0))
    writes = _count_pwrites(monkeypatch)
    codes = part.write_txn_markers([TxnMarker(pid, 0, 0, pid != 2) for pid in PIDS])
    assert codes == [0, 0, 0]
    assert len(writes) == 1
    assert (part.log_end_offset, part.last_stable_offset, part.open_transaction_count) == (6, 6, 0)
    assert [
        (a.producer_id, a.first_offset, a.last_offset)
        for a in part.log.collect_aborted_transactions(0, 6)
    ] == [(2, 1, 4)]


def test_a_producer_repeated_starts_a_new_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = open_partition(tmp_path, LogConfig())
    part.append_records(txn(1, 0))
    writes = _count_pwrites(monkeypatch)
    # The second marker of producer 1 must see the first one applied: it completes
    # nothing (the transaction is closed), as it would one by one.
    codes = part.write_txn_markers(
        [TxnMarker(1, 0, 0, True), TxnMarker(2, 0, 0, True), TxnMarker(1, 0, 0, False)]
    )
    assert codes == [0, 0, 0]
    assert len(writes) == 2
    assert part.log.collect_aborted_transactions(0, 10) == []


def test_invalid_markers_are_left_out_of_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = open_partition(tmp_path, LogConfig())
    part.append_records(txn(1, 0, epoch=3))
    part.append_records(txn(2, 0))
    writes = _count_pwrites(monkeypatch)
    codes = part.write_txn_markers([TxnMarker(1, 2, 0, True), TxnMarker(2, 0, 0, True)])
    assert codes == [47, 0]  # INVALID_PRODUCER_EPOCH for the stale epoch
    assert len(writes) == 1
    assert part.log_end_offset == 3


def test_a_group_that_would_roll_the_segment_is_written_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = open_partition(tmp_path, LogConfig(segment_bytes=250))
    for pid in PIDS:
        part.append_records(txn(pid, 0))
    writes = _count_pwrites(monkeypatch)
    assert part.write_txn_markers([TxnMarker(pid, 0, 0, True) for pid in PIDS]) == [0, 0, 0]
    assert len(writes) == 3
    assert len(part.log.segments) > 1
    assert part.last_stable_offset == part.log_end_offset == 6


class _Partitions:
    """What WriteTxnMarkersApi needs of a PartitionManager."""

    def __init__(self, partitions: dict[tuple[str, int], Partition]) -> None:
        self.partitions = partitions
        self.notified: list[tuple[str, int]] = []

    def notify(self, tp: tuple[str, int]) -> None:
        self.notified.append(tp)


def test_api_writes_each_partitions_markers_together_and_answers_in_request_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = {
        ("t", i): Partition("t", TOPIC_ID, i, tmp_path / str(i), LogConfig(), clock=lambda: 1.0)
        for i in (0, 1)
    }
    for part in parts.values():
        for pid in PIDS:
            part.append_records(txn(pid, 0))
    manager = _Partitions(parts)
    api = WriteTxnMarkersApi(manager, None)  # type: ignore[arg-type]
    request = make(
        request_class(27, 1),
        {
            "markers": [
                {
                    "producer_id": pid,
                    "producer_epoch": 0 if pid != 3 else -1,  # 3: fenced on both partitions
                    "transaction_result": True,
                    "coordinator_epoch": 0,
                    "topics": [{"name": "t", "partition_indexes": [1, 0]}],
                }
                for pid in PIDS
            ]
        },
    )
    writes = _count_pwrites(monkeypatch)
    ctx = RequestContext(27, 1, 1, "txnchaos-node-1", "127.0.0.1:1", 1)  # a coordinator
    response = asyncio.run(api.handle(ctx, request))
    assert len(writes) == 2  # one per partition
    got = [
        (m.producer_id, [(p.partition_index, p.error_code) for t in m.topics for p in t.partitions])
        for m in response.markers
    ]
    assert got == [(1, [(1, 0), (0, 0)]), (2, [(1, 0), (0, 0)]), (3, [(1, 47), (0, 47)])]
    assert sorted(set(manager.notified)) == [("t", 0), ("t", 1)]
    assert response.error_codes == (47, 47)
