"""Verifying pipelined Produce requests together (``cluster/broker/verification_lookahead``):
which frames' partitions are taken, and that an answer serves only the frame it was asked
for and only while its guard holds (the marker race)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.broker.verification_lookahead import VerificationLookahead
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import encode_request, request_class
from txnchaos.cluster.storage import LogConfig

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=200)
NOW_MS = 1_000_000
INVALID_TXN_STATE = 48
PID, EPOCH = 7, 3


@pytest.fixture
def parts(tmp_path: Path) -> dict[tuple[str, int], Partition]:
    return {
        ("t", i): Partition(
            "t", uuid.UUID(int=1), i, tmp_path / str(i), CFG, clock=lambda: NOW_MS / 1000
        )
        for i in range(3)
    }


def batch(pid: int = PID, epoch: int = EPOCH, seq: int = 0) -> bytes:
    return make_batch(1, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=True)


def produce_frame(txn_id: str | None, partitions: dict[int, bytes]) -> bytes:
    """A Produce v10 request frame as the server holds it (no size prefix)."""
    request = make(
        request_class(0, 10),
        transactional_id=txn_id,
        acks=-1,
        timeout=1000,
        topic_data=[
            {
                "name": "t",
                "partition_data": [{"index": i, "records": r} for i, r in partitions.items()],
            }
        ],
    )
    return encode_request(1, request, "c")[4:]


def metadata_frame() -> bytes:
    request = make(
        request_class(3, 12),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return encode_request(2, request, "c")[4:]


def lookahead(parts: dict[tuple[str, int], Partition]) -> VerificationLookahead:
    return VerificationLookahead(lambda t, i: parts.get((t, i)), clock=lambda: 0.0)


def test_takes_first_writes_of_the_same_transaction_only(
    parts: dict[tuple[str, int], Partition],
) -> None:
    opened = parts[("t", 2)]
    assert opened.append_records(batch(), opened.start_verification(PID, EPOCH)).error_code == 0
    frames = [
        metadata_frame(),
        produce_frame("txn", {1: batch()}),
        produce_frame("other", {0: batch()}),  # another transactional id
        produce_frame("txn", {0: batch(epoch=EPOCH - 1)}),  # another epoch
        produce_frame("txn", {2: batch(seq=1)}),  # ongoing there already: nothing to ask
        produce_frame("txn", {9: batch()}),  # not a partition of this node
        produce_frame("txn", {0: batch()}),
    ]
    ahead = lookahead(parts).pipelined(frames, "txn", PID, EPOCH)
    assert [(a.frame, a.partition) for a in ahead] == [
        (frames[1], ("t", 1)),
        (frames[6], ("t", 0)),
    ]
    assert all(a.guard is parts[a.partition].start_verification(PID, EPOCH) for a in ahead)


def test_an_answer_serves_its_own_frame_once(parts: dict[tuple[str, int], Partition]) -> None:
    la = lookahead(parts)
    frame = produce_frame("txn", {0: batch(), 1: batch()})
    ahead = la.pipelined([frame], "txn", PID, EPOCH)
    la.keep(ahead, {("t", 1): INVALID_TXN_STATE}, PID, EPOCH)
    assert la.take(bytes(bytearray(frame))) is None  # equal bytes, another request
    answer = la.take(frame)
    assert answer is not None
    assert set(answer.guards_for(PID, EPOCH)) == {("t", 0)}  # the refused one is not kept
    assert answer.guards_for(PID, EPOCH + 1) == {}
    assert la.take(frame) is None
    assert len(la) == 0


def test_a_marker_after_the_answer_voids_it(parts: dict[tuple[str, int], Partition]) -> None:
    """The seed's race, ahead: the coordinator said "ongoing", then the transaction's
    marker was written before the pipelined frame's turn: its batch must be refused."""
    la = lookahead(parts)
    frame = produce_frame("txn", {0: batch()})
    la.keep(la.pipelined([frame], "txn", PID, EPOCH), {}, PID, EPOCH)
    p = parts[("t", 0)]
    assert p.write_txn_marker(PID, EPOCH, 0, False) == 0
    answer = la.take(frame)
    assert answer is not None
    kept = answer.guards_for(PID, EPOCH)[("t", 0)]
    assert p.start_verification(PID, EPOCH) is not kept  # so the produce asks again
    assert p.append_records(batch(), kept).error_code == INVALID_TXN_STATE
    assert p.open_transaction_count == 0
