"""KIP-664's admin abort on a partition: an operator's WriteTxnMarkers is accepted only for
an open transaction at the producer's latest epoch; coordinator epoch -1 skips coordinator
fencing and leaves the producer's coordinator epoch as it was, so the coordinator's own
marker for the same transaction is still accepted afterwards."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition, TxnMarker
from txnchaos.cluster.storage import LogConfig

TOPIC_ID = uuid.UUID(int=98)
NOW_MS = 1_000_000
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52


@pytest.fixture
def part(tmp_path: Path) -> Partition:
    return Partition("t", TOPIC_ID, 0, tmp_path, LogConfig(), clock=lambda: NOW_MS / 1000)


def txn(pid: int, seq: int, epoch: int = 3, ts: int = 500) -> bytes:
    return make_batch(
        1, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=True, timestamp=ts
    )


def admin_abort(part: Partition, pid: int, epoch: int, coordinator_epoch: int = -1) -> int:
    return part.write_txn_markers([TxnMarker(pid, epoch, coordinator_epoch, False, 0, True)])[0]


def test_admin_abort_ends_the_open_transaction_and_moves_the_lso(part: Partition) -> None:
    part.append_records(txn(1, 0))
    part.append_records(make_batch(1))
    assert part.last_stable_offset == 0
    assert admin_abort(part, 1, 3) == 0
    assert part.last_stable_offset == part.high_watermark == 3
    read = part.read(0, 1 << 20, isolation_level=1)
    assert read.aborted_transactions == [(1, 0)]


def test_admin_abort_needs_an_open_transaction(part: Partition) -> None:
    assert admin_abort(part, 1, 3) == INVALID_TXN_STATE  # no state at all
    part.append_records(txn(1, 0))
    assert part.write_txn_marker(1, 3, 0, True) == 0  # committed by its coordinator
    assert admin_abort(part, 1, 3) == INVALID_TXN_STATE
    assert part.high_watermark == 2  # nothing written by the refusals


def test_admin_abort_needs_the_latest_epoch_exactly(part: Partition) -> None:
    part.append_records(txn(1, 0))
    assert admin_abort(part, 1, 2) == INVALID_PRODUCER_EPOCH
    assert admin_abort(part, 1, 4) == INVALID_PRODUCER_EPOCH  # only a coordinator bumps it
    assert part.open_transaction_count == 1
    assert admin_abort(part, 1, 3) == 0


def test_coordinator_epoch_forms(part: Partition) -> None:
    part.append_records(txn(1, 0))
    assert part.write_txn_marker(1, 3, 7, True) == 0  # coordinator epoch 7 known here
    part.append_records(txn(1, 1))
    # the form for older brokers: a real coordinator epoch, fenced like a coordinator's
    assert admin_abort(part, 1, 3, coordinator_epoch=6) == TRANSACTION_COORDINATOR_FENCED
    # the seed's admin form: -1, no fencing, and the producer keeps coordinator epoch 7
    assert admin_abort(part, 1, 3) == 0
    entry = part.producer_state.last_entry(1)
    assert entry is not None and entry.coordinator_epoch == 7
    # the coordinator later ends the same transaction (timeout: epoch bumped): accepted,
    # completes nothing, so it is neither stuck retrying nor refused
    assert part.write_txn_marker(1, 4, 7, False) == 0
    assert part.open_transaction_count == 0


def test_admin_abort_survives_a_reload(tmp_path: Path) -> None:
    part = Partition("t", TOPIC_ID, 0, tmp_path, LogConfig(), clock=lambda: NOW_MS / 1000)
    part.append_records(txn(1, 0))
    assert part.write_txn_marker(1, 3, 7, True) == 0
    part.append_records(txn(1, 1))
    assert admin_abort(part, 1, 3) == 0
    part.close()
    again = Partition("t", TOPIC_ID, 0, tmp_path, LogConfig(), clock=lambda: NOW_MS / 1000)
    try:
        entry = again.producer_state.last_entry(1)
        assert entry is not None
        assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (None, 7)
        assert again.last_stable_offset == again.high_watermark
    finally:
        again.close()


def test_longest_open_transaction_start(part: Partition) -> None:
    part.append_records(txn(1, 0, ts=900))
    part.append_records(txn(2, 0, ts=400))  # opened later in the log, earlier in time
    assert part.longest_open_transaction_start_ms == 400
    assert part.write_txn_marker(2, 3, 0, True) == 0
    assert part.longest_open_transaction_start_ms == 900
    assert part.write_txn_marker(1, 3, 0, False) == 0
    assert part.longest_open_transaction_start_ms == -1
