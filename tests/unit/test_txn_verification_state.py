"""KIP-890 part 1 on one partition: the verification guard and the marker race."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from _batches import make_batch

from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.broker.verification_state import SENTINEL
from txnchaos.cluster.storage import LogConfig

TOPIC_ID = uuid.UUID(int=7)
CFG = LogConfig(segment_bytes=4000, index_interval_bytes=200)
NOW_MS = 1_000_000
INVALID_TXN_STATE = 48


@pytest.fixture
def part(tmp_path: Path) -> Partition:
    return Partition("t", TOPIC_ID, 0, tmp_path, CFG, clock=lambda: NOW_MS / 1000)


def txn(pid: int, seq: int, epoch: int = 0) -> bytes:
    return make_batch(1, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=True)


def test_verified_batch_opens_the_transaction(part: Partition) -> None:
    guard = part.start_verification(1, 0)
    assert guard is not SENTINEL
    assert part.append_records(txn(1, 0), guard).error_code == 0
    assert part.has_ongoing_transaction(1, 0)
    assert len(part.verification) == 0  # used up: the transaction is ongoing now
    # Later writes of the same transaction need no verification.
    assert part.start_verification(1, 0) is SENTINEL
    assert part.append_records(txn(1, 1), SENTINEL).error_code == 0


def test_marker_written_during_verification_refuses_the_batch(part: Partition) -> None:
    """The race of the seed: the coordinator answered "ongoing", then the abort marker
    was written before the batch: the batch must not open a new (hanging) transaction."""
    guard = part.start_verification(1, 0)
    assert part.write_txn_marker(1, 0, 0, False) == 0
    result = part.append_records(txn(1, 0), guard)
    assert result.error_code == INVALID_TXN_STATE
    assert part.open_transaction_count == 0
    assert part.last_stable_offset == part.high_watermark


def test_transaction_ended_after_the_check_refuses_an_unverified_batch(part: Partition) -> None:
    assert part.append_records(txn(1, 0), part.start_verification(1, 0)).error_code == 0
    no_check_needed = part.start_verification(1, 0)
    assert no_check_needed is SENTINEL
    assert part.write_txn_marker(1, 0, 0, True) == 0
    assert part.append_records(txn(1, 1), no_check_needed).error_code == INVALID_TXN_STATE


def test_without_verification_anything_is_appended(part: Partition) -> None:
    assert part.append_records(txn(1, 0)).error_code == 0  # None: verification off
    assert part.open_transaction_count == 1


def test_concurrent_verifications_share_a_guard_and_expire(part: Partition) -> None:
    first = part.start_verification(1, 0)
    assert part.start_verification(1, 0) is first
    other = part.start_verification(2, 0)
    assert other is not first
    part.verification.expire(NOW_MS + 10, max_age_ms=10)
    assert len(part.verification) == 0
    assert part.append_records(txn(1, 0), first).error_code == INVALID_TXN_STATE


def test_non_transactional_batches_are_not_checked(part: Partition) -> None:
    assert part.append_records(make_batch(1), part.start_verification(5, 0)).error_code == 0
