"""KIP-890 for TxnOffsetCommit: before a transaction's first offsets for a group are
kept, the group coordinator verifies with the transaction coordinator that the
transaction added the group's ``__consumer_offsets`` partition (part 1: old clients
sent AddOffsetsToTxn; while ``transaction.partition.verification.enable`` is on, at
every transaction.version), or has the coordinator add it (part 2: TxnOffsetCommit v5,
whatever the setting; refused with UNSUPPORTED_VERSION at transaction.version 0, as
Kafka), as a broker does for a Produce (``broker.txn_verification``).

The same guard and rule as on a data partition (``broker.verification_state``) close
the marker race: a marker that reaches the offsets partition while the verification is
on the wire and may end the verified transaction invalidates it, and the commit is
refused instead of leaving pending offsets of a finished transaction behind.

Errors follow the seed's TxnOffsetCommit mapping: INVALID_TXN_STATE,
INVALID_PRODUCER_ID_MAPPING (and INVALID_PRODUCER_EPOCH) as they are; every retriable
error becomes COORDINATOR_NOT_AVAILABLE (TxnOffsetCommit has no NOT_ENOUGH_REPLICAS
and no error message). TxnOffsetCommit v4+ clients get TRANSACTION_ABORTABLE as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode as E

from ...broker.txn_verification import TxnVerifier
from ...broker.verification_state import VerificationState
from ..placement import GROUP_TOPIC

INVALID_TXN_STATE = int(E.invalid_txn_state)
MAX_KEPT = 1000
EXPIRY_MS = 900_000
COORDINATOR_NOT_AVAILABLE = int(E.coordinator_not_available)
KEPT = frozenset(
    int(e)
    for e in (
        E.invalid_txn_state,
        E.invalid_producer_id_mapping,
        E.invalid_producer_epoch,
        E.transaction_abortable,
        E.unsupported_version,  # a TV2 commit at transaction.version 0 (Kafka: the same)
    )
)
IMPLICIT_ADD_VERSION = 5  # TxnOffsetCommit v5: the broker adds the offsets partition
GENERIC_ERRORS_VERSION = 4  # TxnOffsetCommit v4+: TRANSACTION_ABORTABLE is known


def offsets_commit_error(error: int) -> int:
    """A failed verification as a TxnOffsetCommit answers it."""
    return error if error in KEPT else COORDINATOR_NOT_AVAILABLE


class TxnOffsetVerification:
    def __init__(
        self,
        verifier: TxnVerifier,
        active: Callable[[], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.verifier = verifier
        self.active = active
        self._clock = clock
        self._states: dict[int, VerificationState] = {}  # offsets partition -> state

    @staticmethod
    def implicit_add(version: int) -> bool:
        return version >= IMPLICIT_ADD_VERSION

    def wanted(self, version: int) -> bool:
        """Whether a TxnOffsetCommit of this version is checked (or added) at all."""
        return self.active() or self.implicit_add(version)

    async def check(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partition: int,
        version: int = 3,
    ) -> int:
        """0 when the transaction has (or now, by implicit add, has) offsets partition
        ``partition``, else the error for every partition of the TxnOffsetCommit."""
        state = self._states.setdefault(partition, VerificationState())
        now_ms = int(self._clock() * 1000)
        if len(state) > MAX_KEPT:
            state.expire(now_ms, EXPIRY_MS)  # verifications whose commit never came
        add = self.implicit_add(version)
        guard = state.start(producer_id, producer_epoch, now_ms, epoch_bump=add)
        failed = await self.verifier.verify(
            transactional_id,
            producer_id,
            producer_epoch,
            [(GROUP_TOPIC, partition)],
            verify_only=not add,
            generic_errors=version >= GENERIC_ERRORS_VERSION,
        )
        if failed:
            return offsets_commit_error(next(iter(failed.values())))
        if not state.verified(producer_id, guard):
            return INVALID_TXN_STATE  # a marker ended the verified transaction meanwhile
        state.clear(producer_id)
        return 0

    def marker(self, producer_id: int, producer_epoch: int, partitions: Iterable[int]) -> None:
        """A marker of the producer at ``producer_epoch`` reached these offsets partitions."""
        for p in partitions:
            state = self._states.get(p)
            if state is not None:
                state.marker(producer_id, producer_epoch)
