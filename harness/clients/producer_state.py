"""Producer id, epoch and per-partition sequence numbers.

A batch's sequence is assigned once, when it is first sent, and kept across its retries (so
the broker deduplicates a retry whose first attempt was written). Every change of producer id
or epoch (InitProducerId, a KIP-360 bump, a TV2 EndTxn) restarts every partition at 0, as the
broker expects of a new epoch. The ids used before are kept, newest last, so a misbehaving
producer can go back to one (``reuse_stale_epoch``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...cluster.protocol.record_batch import increment_sequence

NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_EPOCH

    @property
    def valid(self) -> bool:
        return self.producer_id >= 0 and self.epoch >= 0


@dataclass
class ProducerState:
    current: ProducerIdAndEpoch = field(default_factory=ProducerIdAndEpoch)
    #: Every (id, epoch) this producer used before ``current``, oldest first.
    previous: list[ProducerIdAndEpoch] = field(default_factory=list)
    _next_sequence: dict[tuple[str, int], int] = field(default_factory=dict)

    def set_id(self, producer_id: int, epoch: int) -> bool:
        """Adopt a producer id and epoch; True (and sequences reset) if they changed."""
        new = ProducerIdAndEpoch(producer_id, epoch)
        if new == self.current:
            return False
        if self.current.valid:
            self.previous.append(self.current)
        self.current = new
        self._next_sequence.clear()
        return True

    def bump_locally(self) -> bool:
        """An idempotent producer's own epoch bump (KIP-360); False at the epoch limit
        (the caller then asks for a new producer id)."""
        if not self.current.valid or self.current.epoch >= MAX_EPOCH:
            return False
        return self.set_id(self.current.producer_id, self.current.epoch + 1)

    def next_sequence(self, topic: str, partition: int) -> int:
        return self._next_sequence.get((topic, partition), 0)

    def take_sequence(self, topic: str, partition: int, count: int) -> int:
        """The base sequence of a batch of ``count`` records; advances the partition."""
        base = self.next_sequence(topic, partition)
        self._next_sequence[(topic, partition)] = increment_sequence(base, count)
        return base

    def rewind_sequence(self, topic: str, partition: int, base: int) -> None:
        """A batch that certainly was not written gives its sequences back (it was the last
        one assigned for the partition: one batch is in flight per partition)."""
        self._next_sequence[(topic, partition)] = base

    def reset_sequences(self) -> None:
        self._next_sequence.clear()
