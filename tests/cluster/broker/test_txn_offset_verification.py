"""The marker race on the offsets path: a TxnOffsetCommit's verification (or TV2
implicit add) is on the wire to a real server playing the transaction coordinator when
a marker of the same producer reaches the offsets partition. The rule is the data
partitions' (``broker.verification_state``): only a marker that may end the verified
transaction voids it."""

from __future__ import annotations

import asyncio

from tests.cluster.broker.test_txn_verifier import LIMIT, started
from tests.cluster.coordinator.transactions.txn_support import async_test
from txnchaos.cluster.coordinator.groups.txn_offset_verification import TxnOffsetVerification

INVALID_TXN_STATE = 48
OFFSETS_PARTITION = 0  # the playing coordinator has partition 0 in every transaction
TV2_COMMIT = 5  # TxnOffsetCommit v5: the broker adds the offsets partition (TV2)
OLD_COMMIT = 3  # TxnOffsetCommit v3: verify only


async def commit_with_marker_meanwhile(version: int, epoch: int, marker_epoch: int) -> int:
    """The check's answer when a marker at ``marker_epoch`` lands while it waits."""
    coordinator, verifier = await started()
    offsets = TxnOffsetVerification(verifier, lambda: True)
    try:
        check = asyncio.ensure_future(
            offsets.check("txn", 7, epoch, OFFSETS_PARTITION, version=version)
        )
        await asyncio.wait_for(coordinator.first_arrived.wait(), LIMIT)
        offsets.marker(7, marker_epoch, [OFFSETS_PARTITION])
        coordinator.release.set()
        return await asyncio.wait_for(check, LIMIT)
    finally:
        await verifier.close()
        await coordinator.server.stop()


@async_test
async def test_tv2_previous_transactions_marker_keeps_the_offsets_add() -> None:
    """Transaction N (epoch 3) ends with a marker at 4, N+1's epoch: N+1's offsets
    stand (they used to be refused, and before that silently lost)."""
    assert await commit_with_marker_meanwhile(TV2_COMMIT, epoch=4, marker_epoch=4) == 0


@async_test
async def test_tv2_marker_of_the_verified_transaction_refuses_the_offsets() -> None:
    assert await commit_with_marker_meanwhile(TV2_COMMIT, 4, 5) == INVALID_TXN_STATE


@async_test
async def test_old_client_same_epoch_marker_refuses_the_offsets() -> None:
    """TV0/1: the transaction and its marker share the epoch: the seed's race, refused."""
    assert await commit_with_marker_meanwhile(OLD_COMMIT, 4, 4) == INVALID_TXN_STATE


@async_test
async def test_a_marker_of_another_producer_changes_nothing() -> None:
    coordinator, verifier = await started()
    offsets = TxnOffsetVerification(verifier, lambda: True)
    try:
        check = asyncio.ensure_future(offsets.check("txn", 7, 4, OFFSETS_PARTITION, OLD_COMMIT))
        await asyncio.wait_for(coordinator.first_arrived.wait(), LIMIT)
        offsets.marker(8, 4, [OFFSETS_PARTITION])
        coordinator.release.set()
        assert await asyncio.wait_for(check, LIMIT) == 0
    finally:
        await verifier.close()
        await coordinator.server.stop()
