"""KIP-890 part 1 on one partition: the verification guard and the marker race."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.broker.verification_state import SENTINEL, VerificationState
from txnchaos.cluster.storage import LogConfig

TOPIC_ID = uuid.UUID(int=7)
CFG = LogConfig(segment_bytes=4000, index_interval_bytes=200)
NOW_MS = 1_000_000
INVALID_TXN_STATE = 48
INVALID_PRODUCER_EPOCH = 47
TV2 = 2


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


# -- the epoch rule: which marker voids a verification -------------------------------


def test_tv2_previous_transactions_marker_leaves_the_next_verification(part: Partition) -> None:
    """TV2: transaction 1 (epoch 0) ends with a marker at its bumped epoch 1, which is the
    next transaction's epoch; landing while that one's implicit add is on the wire, it
    must not void the add's verification (the produce would get INVALID_TXN_STATE)."""
    assert (
        part.append_records(txn(1, 0, epoch=0), part.start_verification(1, 0, True)).error_code == 0
    )
    guard = part.start_verification(1, 1, epoch_bump=True)  # transaction 2: epoch 1
    assert guard is not SENTINEL
    assert part.write_txn_marker(1, 1, 0, True, transaction_version=TV2) == 0
    assert part.append_records(txn(1, 0, epoch=1), guard).error_code == 0
    assert part.has_ongoing_transaction(1, 1)
    assert len(part.verification) == 0  # used up by the append


def test_tv2_marker_of_the_verified_transaction_voids_it(part: Partition) -> None:
    """TV2: the verified transaction (epoch 1) is ended by a marker at 2 (say, a timeout
    abort) while its verification is on the wire: the batch is refused, nothing hangs."""
    guard = part.start_verification(1, 1, epoch_bump=True)
    assert part.write_txn_marker(1, 2, 0, False, transaction_version=TV2) == 0
    assert part.append_records(txn(1, 0, epoch=1), guard).error_code == INVALID_TXN_STATE
    assert part.open_transaction_count == 0
    assert part.last_stable_offset == part.high_watermark


def test_tv0_tv1_marker_at_the_same_epoch_voids(part: Partition) -> None:
    """TV0/1: a transaction keeps its epoch, and so does its marker: a marker at the
    verification's epoch may be the verified transaction's own, so it voids (the seed)."""
    assert part.append_records(txn(1, 0), part.start_verification(1, 0)).error_code == 0
    assert part.write_txn_marker(1, 0, 0, True) == 0  # transaction 1 ends ...
    guard = part.start_verification(1, 0)
    assert part.write_txn_marker(1, 0, 0, False) == 0  # ... a marker at epoch 0 again
    assert part.append_records(txn(1, 1), guard).error_code == INVALID_TXN_STATE
    assert part.open_transaction_count == 0


def test_a_holder_at_an_older_epoch_is_fenced_when_the_guard_survives(part: Partition) -> None:
    """Two produces share one guard (epochs 0 and 1, the entry at 1, TV2); the marker at 1
    ends epoch 0's transaction and keeps the guard: the epoch-0 batch is still refused,
    by the producer epoch the marker left behind, while the epoch-1 batch goes in."""
    old = part.start_verification(1, 0)
    new = part.start_verification(1, 1, epoch_bump=True)
    assert old is new
    assert part.write_txn_marker(1, 1, 0, False, transaction_version=TV2) == 0
    assert part.append_records(txn(1, 0, epoch=0), old).error_code == INVALID_PRODUCER_EPOCH
    assert part.append_records(txn(1, 0, epoch=1), new).error_code == 0
    assert part.has_ongoing_transaction(1, 1)


epochs = st.integers(min_value=0, max_value=5)


@given(v=epochs, m=epochs, bump=st.booleans())
def test_a_marker_voids_every_verification_it_may_end(v: int, m: int, bump: bool) -> None:
    """A marker at m may end a verified transaction at v when m > v (TV2: its markers
    carry v + 1) or m >= v (TV0/1); such a marker always voids. Only the previous TV2
    transaction's marker (m == v) leaves the verification alone."""
    state = VerificationState()
    guard = state.start(1, v, NOW_MS, epoch_bump=bump)
    state.marker(1, m)
    may_end = m > v if bump else m >= v
    kept = state.verified(1, guard)
    assert kept == (bump and m == v)
    assert not (may_end and kept)


@given(v=epochs, m=epochs, bump=st.booleans())
def test_a_marker_of_another_producer_voids_nothing(v: int, m: int, bump: bool) -> None:
    state = VerificationState()
    guard = state.start(1, v, NOW_MS, epoch_bump=bump)
    state.marker(2, m)
    assert state.verified(1, guard)


def test_a_newer_epoch_takes_the_shared_entry_over() -> None:
    """An old-protocol verification at 0 shared by a TV2 one at 1: the TV2 rule holds
    for the entry (its marker at 1 is the previous transaction's); the reverse, a TV0/1
    verification at a newer epoch, brings back the void-on-every-marker rule."""
    state = VerificationState()
    guard = state.start(1, 0, NOW_MS)
    assert state.start(1, 1, NOW_MS, epoch_bump=True) is guard
    state.marker(1, 1)
    assert state.verified(1, guard)
    assert state.start(1, 2, NOW_MS) is guard
    state.marker(1, 2)
    assert not state.verified(1, guard)
