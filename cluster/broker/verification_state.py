"""The in-memory verification state of one partition (KIP-890 part 1).

Before a transactional batch is appended to a partition where its producer has no
ongoing transaction, the broker verifies with the coordinator (``txn_verification``)
and receives a guard when it starts. The guard is kept here per producer id until a
transactional batch of that producer is appended or a marker ending the verified
transaction is written. The append checks that the guard it carries is still the one
kept here: if a marker ended the transaction while the verification was on the wire,
the guard is gone and the batch is refused with INVALID_TXN_STATE instead of opening
a hanging transaction (the race the seed describes).

Which marker ends the verified transaction (:meth:`VerificationState.marker`):

* a verification for a client that bumps its epoch per transaction (TV2: Produce v12,
  TxnOffsetCommit v5, ``epoch_bump``) is for the transaction at its epoch E, whose
  markers carry E + 1; a marker at E is the previous transaction's, written with that
  transaction's bumped epoch, and leaves the verification alone. Any other epoch voids
  it: a later one ended the verified transaction (or fenced it); an earlier one keeps
  Kafka's conservative answer, and a holder of the guard at an older epoch than E is
  fenced anyway by the producer epoch the marker leaves behind (as in Kafka's
  ``UnifiedLog.updateProducers``);
* any other verification (TV0/1: the transaction keeps its epoch, and so does its
  marker) is voided by every marker of the producer, as the seed describes.
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
    epoch_bump: bool  # the verified transaction's markers carry epoch + 1 (TV2)
    created_ms: int


class VerificationState:
    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}

    def start(
        self, producer_id: int, epoch: int, now_ms: int, *, epoch_bump: bool = False
    ) -> VerificationGuard:
        """The guard for a verification of ``producer_id`` at ``epoch``: a verification
        already started for it (and not yet used) shares its guard, as Kafka does; a
        newer epoch takes the entry over (its protocol says what its markers carry)."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = _Entry(VerificationGuard(), epoch, epoch_bump, now_ms)
            self._entries[producer_id] = entry
        elif epoch > entry.epoch:
            entry.epoch = epoch
            entry.epoch_bump = epoch_bump
        return entry.guard

    def verified(self, producer_id: int, guard: VerificationGuard) -> bool:
        entry = self._entries.get(producer_id)
        return entry is not None and guard is not SENTINEL and entry.guard is guard

    def clear(self, producer_id: int) -> None:
        """A transactional batch of the producer was appended: its transaction is
        ongoing, the verification is used up."""
        self._entries.pop(producer_id, None)

    def marker(self, producer_id: int, marker_epoch: int) -> None:
        """A marker of ``producer_id`` at ``marker_epoch`` was written: void the
        verification if the marker may end the verified transaction (module doc)."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return
        if entry.epoch_bump and marker_epoch == entry.epoch:
            return  # the previous transaction's marker (TV2): the next one goes on
        del self._entries[producer_id]

    def expire(self, now_ms: int, max_age_ms: int) -> None:
        """Forget verifications never used (their produce failed or never came)."""
        old = [pid for pid, e in self._entries.items() if now_ms - e.created_ms >= max_age_ms]
        for pid in old:
            del self._entries[pid]

    def __len__(self) -> int:
        return len(self._entries)
