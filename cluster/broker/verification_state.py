"""The in-memory verification state of one partition (KIP-890 part 1).

Before a transactional batch is appended to a partition where its producer has no
ongoing transaction, the broker verifies with the coordinator (``txn_verification``)
and receives a guard when it starts. The guard is kept here per producer id until a
transactional batch of that producer is appended or a marker for it is written. The
append checks that the guard it carries is still the one kept here: if a marker
ended the transaction while the verification was on the wire, the guard is gone and
the batch is refused with INVALID_TXN_STATE instead of opening a hanging
transaction (the race the seed describes).
"""

from __future__ import annotations

from dataclasses import dataclass


class VerificationGuard:
    """An identity: one verification of one producer on one partition."""

    __slots__ = ()


SENTINEL = VerificationGuard()
"""The guard of a batch that needed no verification (the transaction was ongoing);
it matches no kept guard, so it passes only while the transaction is still ongoing."""


@dataclass(slots=True)
class _Entry:
    guard: VerificationGuard
    epoch: int
    created_ms: int


class VerificationState:
    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}

    def start(self, producer_id: int, epoch: int, now_ms: int) -> VerificationGuard:
        """The guard for a verification of ``producer_id``: a verification already
        started for it (and not yet used) shares its guard, as Kafka does."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = _Entry(VerificationGuard(), epoch, now_ms)
        elif epoch > entry.epoch:
            entry.epoch = epoch
        return entry.guard

    def verified(self, producer_id: int, guard: VerificationGuard) -> bool:
        entry = self._entries.get(producer_id)
        return entry is not None and guard is not SENTINEL and entry.guard is guard

    def clear(self, producer_id: int) -> None:
        self._entries.pop(producer_id, None)

    def expire(self, now_ms: int, max_age_ms: int) -> None:
        """Forget verifications never used (their produce failed or never came)."""
        old = [pid for pid, e in self._entries.items() if now_ms - e.created_ms >= max_age_ms]
        for pid in old:
            del self._entries[pid]

    def __len__(self) -> int:
        return len(self._entries)
