"""Idempotent/transactional producer state of one partition (Kafka semantics).

For each producer id the partition remembers the epoch, the metadata of its last
five batches (so a retried batch is answered with its original offsets), the last
timestamp, the coordinator epoch and the first offset of its open transaction.

Validation of a batch from a client follows Kafka's ProducerAppendInfo:

* duplicate: same epoch and the same first/last sequence as a cached batch;
* epoch lower than the current one: INVALID_PRODUCER_EPOCH;
* higher epoch: the sequence must restart at 0 (KIP-360 epoch bump), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* same epoch: first sequence must be last sequence + 1 (int32 wrap), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* no state for the producer id: any sequence is accepted, as Kafka >= 2.5
  (ProducerAppendInfo.checkSequence). With ``strict_unknown_producer`` (on a node: the
  bug switch ``txnchaos.bug.unknown.producer.strict``) a non-zero sequence gets
  UNKNOWN_PRODUCER_ID instead, the Kafka <= 2.4 rule that makes clients run their
  KIP-360 recovery.
* a non-transactional batch while the producer has an open transaction:
  INVALID_TXN_STATE.

Transaction markers (``validate_marker``) follow ProducerAppendInfo.appendEndTxnMarker:

* TV0/TV1 markers carry the transaction's epoch: a marker epoch below the current
  epoch is INVALID_PRODUCER_EPOCH;
* TV2 coordinators bump the epoch before writing the marker, so the marker epoch must
  be above the current one, except for the retry of a marker already written (same
  epoch, no open transaction), which is accepted and written again;
* a coordinator epoch below the one of the last marker for the producer is
  TRANSACTION_COORDINATOR_FENCED (a zombie coordinator).

A marker for a producer with no open transaction (or no state at all) is still
written; it completes nothing.

An administrative abort (KIP-664: WriteTxnMarkers from an admin client, not a
coordinator; ``validate_admin_marker``) is stricter: the producer must have an open
transaction here (else INVALID_TXN_STATE) and the marker's epoch must be exactly its
latest epoch (else INVALID_PRODUCER_EPOCH), so only the coordinator ever moves the
epoch. Its coordinator epoch is either -1 (the seed's admin form: no coordinator
fencing, and the producer's coordinator epoch is left as it was) or a real one (the
form for older brokers), fenced as a coordinator's.

State survives the removal of the producer's records from the log (KIP-360) and is
dropped only by ``remove_expired`` (producer.id.expiration.ms after its last
timestamp, never while a transaction is open).
"""

from __future__ import annotations

import json
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c

from ..protocol.record_batch import INT32_MAX, NO_PRODUCER_EPOCH, BatchHeader
from ..storage.checkpoint import write_atomic

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
UNKNOWN_PRODUCER_ID = 59

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_TO_KEEP = 3
_SNAPSHOT_MAGIC = b"TXCPS1"
_CRC = struct.Struct(">I")


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    # max timestamp of the batch that opened the current transaction (-1: none)
    current_txn_start_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the cached batches (their sequences belong to the old one)."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.producer_id,
            "epoch": self.producer_epoch,
            "batches": [
                [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                for b in self.batches
            ],
            "ts": self.last_timestamp,
            "coord": self.coordinator_epoch,
            "txn": self.current_txn_first_offset,
            "txn_ts": self.current_txn_start_timestamp,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ProducerStateEntry:
        entry = cls(
            producer_id=int(d["pid"]),
            producer_epoch=int(d["epoch"]),
            last_timestamp=int(d["ts"]),
            coordinator_epoch=int(d["coord"]),
            current_txn_first_offset=None if d["txn"] is None else int(d["txn"]),
            current_txn_start_timestamp=int(d.get("txn_ts", -1)),
        )
        for b in d["batches"]:
            entry.batches.append(BatchMetadata(*(int(x) for x in b)))
        return entry


@dataclass(frozen=True, slots=True)
class Validation:
    """Outcome of checking a client batch: error, duplicate of a cached batch, or ok."""

    error_code: int = NONE
    message: str | None = None
    duplicate: BatchMetadata | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == NONE and self.duplicate is None


_VALID = Validation()
"""The (immutable) answer for a batch or marker that passes: shared, not rebuilt."""


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """In-memory producer state with snapshots in the partition directory."""

    def __init__(
        self,
        directory: Path,
        producer_id_expiration_ms: int = 86_400_000,
        strict_unknown_producer: bool = True,
        expire_open_transactions: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.strict_unknown_producer = strict_unknown_producer
        # Bug switch (cluster/bugs.py, KAFKA-9144): expiry forgets producers mid-transaction.
        self.expire_open_transactions = expire_open_transactions
        self.producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of open txn
        self.map_end_offset = 0  # state reflects every batch below this offset

    # -- queries -----------------------------------------------------------------
    @property
    def producer_count(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, if any."""
        return min(self._ongoing.values()) if self._ongoing else None

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return dict(self._ongoing)

    @property
    def open_transaction_count(self) -> int:
        return len(self._ongoing)

    def oldest_open_transaction(self) -> ProducerStateEntry | None:
        """The entry of the producer whose open transaction has the lowest first offset."""
        if not self._ongoing:
            return None
        pid = min(self._ongoing, key=self._ongoing.__getitem__)
        return self.producers.get(pid)

    def earliest_open_transaction_start(self) -> int:
        """The earliest start timestamp of the open transactions here; -1 if none.  Read by
        the metrics endpoint's thread while the node's loop changes ``_ongoing``: it iterates
        a copy (taken in one step under the GIL)."""
        starts = [
            e.current_txn_start_timestamp
            for pid in list(self._ongoing)
            if (e := self.producers.get(pid)) is not None and e.current_txn_start_timestamp >= 0
        ]
        return min(starts, default=-1)

    def last_stable_offset_after(self, producer_id: int, marker_offset: int) -> int:
        """The LSO once ``producer_id``'s transaction ends with a marker at
        ``marker_offset``: the first offset of the oldest other open transaction, else
        the offset after the marker (Kafka's ProducerStateManager.lastStableOffset)."""
        others = [first for pid, first in self._ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    # -- validation --------------------------------------------------------------
    def validate(self, header: BatchHeader) -> Validation:
        """Check a data batch from a client against the producer's state."""
        pid = header.producer_id
        if not header.has_producer_id:
            return _VALID
        epoch, first_seq = header.producer_epoch, header.base_sequence
        entry = self.producers.get(pid)
        if entry is not None:
            dup = entry.find_duplicate(epoch, first_seq, header.last_sequence)
            if dup is not None:
                return Validation(duplicate=dup)
        if entry is None or entry.producer_epoch == NO_PRODUCER_EPOCH:
            if first_seq != 0 and self.strict_unknown_producer:
                return Validation(
                    UNKNOWN_PRODUCER_ID,
                    f"no state for producer {pid}; a new producer must start at sequence 0, "
                    f"got {first_seq}",
                )
        elif epoch < entry.producer_epoch:
            return Validation(
                INVALID_PRODUCER_EPOCH,
                f"epoch {epoch} of producer {pid} is older than the current epoch "
                f"{entry.producer_epoch}",
            )
        elif epoch > entry.producer_epoch:
            if first_seq != 0:
                return Validation(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {epoch} of producer {pid} must start at sequence 0, "
                    f"got {first_seq}",
                )
        elif not in_sequence(entry.last_seq, first_seq):
            return Validation(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence for producer {pid} epoch {epoch}: {first_seq} "
                f"(incoming), {entry.last_seq} (last appended)",
            )
        open_txn = entry is not None and entry.current_txn_first_offset is not None
        if open_txn and not header.is_transactional:
            assert entry is not None
            return Validation(
                INVALID_TXN_STATE,
                f"non-transactional batch from producer {pid}, which has an open "
                f"transaction since offset {entry.current_txn_first_offset}",
            )
        return _VALID

    def validate_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        transaction_version: int = 0,
    ) -> Validation:
        """Check a transaction marker from a coordinator before it is written."""
        entry = self.producers.get(producer_id)
        current = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
        if transaction_version >= 2:
            invalid = producer_epoch <= current
            if (
                invalid
                and producer_epoch == current
                and entry is not None
                and entry.current_txn_first_offset is None
            ):
                invalid = False  # retry of a marker that was already written
        else:
            invalid = producer_epoch < current
        if invalid:
            op = "<=" if transaction_version >= 2 else "<"
            return Validation(
                INVALID_PRODUCER_EPOCH,
                f"marker epoch {producer_epoch} of producer {producer_id} is {op} the "
                f"current epoch {current} (TV{transaction_version})",
            )
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            return Validation(
                TRANSACTION_COORDINATOR_FENCED,
                f"coordinator epoch {coordinator_epoch} of the marker for producer "
                f"{producer_id} is older than {entry.coordinator_epoch} (zombie coordinator)",
            )
        return _VALID

    def validate_admin_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> Validation:
        """Check a marker from an admin client (KIP-664: an abort) before it is written."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.current_txn_first_offset is None:
            return Validation(
                INVALID_TXN_STATE,
                f"producer {producer_id} has no open transaction to abort here",
            )
        if producer_epoch != entry.producer_epoch:
            return Validation(
                INVALID_PRODUCER_EPOCH,
                f"abort epoch {producer_epoch} of producer {producer_id} is not its latest "
                f"epoch {entry.producer_epoch}",
            )
        if coordinator_epoch >= 0 and entry.coordinator_epoch > coordinator_epoch:
            return Validation(
                TRANSACTION_COORDINATOR_FENCED,
                f"coordinator epoch {coordinator_epoch} of the abort for producer "
                f"{producer_id} is older than {entry.coordinator_epoch}",
            )
        return _VALID

    # -- updates (after the batch is in the log; no validation) ----------------------
    def append_data_batch(self, header: BatchHeader, first_offset: int, last_offset: int) -> None:
        """Record an appended data batch (client append or replay of the log)."""
        if not header.has_producer_id:
            self.map_end_offset = max(self.map_end_offset, last_offset + 1)
            return
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        entry.update_epoch(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                first_offset,
                last_offset,
                header.max_timestamp,
            )
        )
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            entry.current_txn_start_timestamp = header.max_timestamp
            self._ongoing[pid] = first_offset
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def complete_txn(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Apply a transaction marker written at ``offset``; returns the finished txn
        (None when the producer had no open transaction here: an empty transaction
        changes neither the LSO nor the aborted-transaction index).

        As Kafka's ProducerStateEntry.update: the marker's epoch becomes the producer's
        epoch (a TV2 bump forgets the cached batches), its coordinator epoch is
        remembered for fencing, and its timestamp is the producer's last timestamp.
        """
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.update_epoch(producer_epoch)
        if coordinator_epoch >= 0:  # -1: an admin abort, which leaves coordinator fencing
            entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        entry.current_txn_start_timestamp = -1
        self.map_end_offset = max(self.map_end_offset, offset + 1)
        if first is None:
            return None
        # The open transaction is known through its producer's entry (as in Kafka): a
        # marker for a producer whose entry is gone ends nothing.
        self._ongoing.pop(producer_id, None)
        return CompletedTxn(producer_id, first, offset, not commit)

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle for producer_id_expiration_ms without an open txn."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if (e.current_txn_first_offset is None or self.expire_open_transactions)
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def reset(self, map_end_offset: int = 0) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self.map_end_offset = map_end_offset

    # -- snapshots ---------------------------------------------------------------
    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for p in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            stem = p.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self, offset: int | None = None, keep: int = SNAPSHOTS_TO_KEEP) -> Path:
        """Write the state (valid for every batch below ``offset``) and prune old ones."""
        offset = self.map_end_offset if offset is None else offset
        payload = json.dumps(
            {"offset": offset, "producers": [e.to_json() for e in self.producers.values()]},
            separators=(",", ":"),
        ).encode()
        path = self.snapshot_path(offset)
        write_atomic(path, _SNAPSHOT_MAGIC + _CRC.pack(crc32c.crc32c(payload)) + payload)
        for old in self.snapshot_offsets()[:-keep]:
            self.snapshot_path(old).unlink(missing_ok=True)
        return path

    def _read_snapshot(self, offset: int) -> list[ProducerStateEntry] | None:
        try:
            data = self.snapshot_path(offset).read_bytes()
        except FileNotFoundError:
            return None
        head = len(_SNAPSHOT_MAGIC) + _CRC.size
        if len(data) < head or not data.startswith(_SNAPSHOT_MAGIC):
            return None
        payload = data[head:]
        if _CRC.unpack_from(data, len(_SNAPSHOT_MAGIC))[0] != crc32c.crc32c(payload):
            return None
        try:
            doc = json.loads(payload)
            if doc["offset"] != offset:
                return None
            return [ProducerStateEntry.from_json(d) for d in doc["producers"]]
        except (ValueError, KeyError, TypeError):
            return None

    def load_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at/below ``max_offset``; delete the ones above
        it and the corrupt ones. Returns its offset (None: empty state, replay all)."""
        self.reset()
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            entries = self._read_snapshot(offset)
            if entries is None:
                self.snapshot_path(offset).unlink(missing_ok=True)
                continue
            for e in entries:
                self.producers[e.producer_id] = e
                if e.current_txn_first_offset is not None:
                    self._ongoing[e.producer_id] = e.current_txn_first_offset
            self.map_end_offset = offset
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o > offset:
                self.snapshot_path(o).unlink(missing_ok=True)

    def delete_snapshots(self) -> None:
        for o in self.snapshot_offsets():
            self.snapshot_path(o).unlink(missing_ok=True)
