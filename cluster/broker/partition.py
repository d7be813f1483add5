"""One partition replica: the log plus producer state, as the network handlers see it.

Single-replica semantics: the high watermark is the log end offset. The last stable
offset is the first offset of the oldest open transaction (never below the log start
offset), else the high watermark.

Transactions (KIP-98): a transactional data batch opens its producer's transaction
at its first offset; a marker written by ``write_txn_marker`` closes it. An abort is
also recorded in the aborted-transaction index of the segment that holds the marker,
with the LSO the partition has once the transaction is complete, and a read_committed
fetch returns the aborted transactions overlapping the fetched range. On open, the
producer state is loaded from the newest snapshot (which carries the first offset of
every open transaction) and the log after it is replayed, which also restores index
entries a crash kept from being written.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..bugs import NO_BUGS, BugSwitches
from ..protocol.record_batch import (
    BatchHeader,
    CorruptBatch,
    build_control_batch,
    iter_batches,
    parse_control_record,
    parse_header,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from ..storage.checkpoint import write_atomic
from ..storage.config import LogConfig
from ..storage.errors import OffsetOutOfRange
from ..storage.log import PartitionLog
from ..storage.log_dir import LogDir
from ..storage.segment import LogSegment
from ..storage.txn_index import AbortedTxn
from .batch_validation import (
    CORRUPT_MESSAGE,
    MESSAGE_TOO_LARGE,
    RECORD_LIST_TOO_LARGE,
    validate_client_batch,
)
from .producer_state import INVALID_TXN_STATE, ProducerStateManager
from .verification_state import SENTINEL, VerificationGuard, VerificationState

NONE = 0
OFFSET_OUT_OF_RANGE = 1
INVALID_PRODUCER_ID_MAPPING = 49
KAFKA_STORAGE_ERROR = 56
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
PARTITION_METADATA_FILE = "partition.metadata"

# Kafka answers these with no log start offset in the Produce response.
_NO_LOG_START_ERRORS = frozenset({CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE})


def _next_offset(records: bytes) -> int:
    """The offset after the last batch of ``records`` (whole batches)."""
    last = None
    for _, header in iter_batches(records):
        last = header
    assert last is not None
    return last.next_offset


class TopicIdMismatch(Exception):
    """The directory belongs to another incarnation of the topic (or is unreadable)."""


class TxnMarker(NamedTuple):
    """One transaction marker to write (the fields of a WriteTxnMarkers marker)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transaction_version: int = 0
    admin: bool = False  # an administrative abort (KIP-664), not a coordinator's marker


@dataclass(slots=True)
class AppendResult:
    error_code: int
    error_message: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    # (batch_index, batch_index_error_message) pairs, as in ProduceResponse
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    duplicate: bool = False  # a retry answered from the producer's cached batches


@dataclass(slots=True)
class ReadResult:
    error_code: int
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # (producer_id, first_offset) pairs, as in FetchResponse AbortedTransactions
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)


def _write_metadata(path: Path, topic_id: uuid.UUID) -> None:
    write_atomic(path, f"version: 0\ntopic_id: {topic_id}\n".encode())


def _read_metadata(path: Path) -> uuid.UUID:
    fields: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        return uuid.UUID(fields["topic_id"])
    except (KeyError, ValueError) as e:
        raise TopicIdMismatch(f"{path} is unreadable: {e!r}") from None


class Partition:
    """The object Produce/Fetch/ListOffsets/DeleteRecords handlers call."""

    def __init__(
        self,
        topic: str,
        topic_id: uuid.UUID,
        index: int,
        directory: Path,
        config: LogConfig,
        producer_id_expiration_ms: int = 86_400_000,
        clock: Callable[[], float] = time.time,
        *,
        leader_epoch: int = 0,
        strict_unknown_producer: bool | None = None,
        bugs: BugSwitches = NO_BUGS,
        log_dir: LogDir | None = None,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.directory = Path(directory)
        self.config = config
        self.leader_epoch = leader_epoch
        self._clock = clock
        self.directory.mkdir(parents=True, exist_ok=True)
        meta = self.directory / PARTITION_METADATA_FILE
        if meta.exists():
            found = _read_metadata(meta)
            if found != topic_id:
                raise TopicIdMismatch(
                    f"{self.directory} holds topic id {found}, not {topic_id} ({topic}-{index})"
                )
        else:
            _write_metadata(meta, topic_id)
        self.log = PartitionLog(self.directory, config, clock, log_dir)
        self.bugs = bugs
        self.producer_state = ProducerStateManager(
            self.directory,
            producer_id_expiration_ms,
            bugs.unknown_producer_strict
            if strict_unknown_producer is None
            else strict_unknown_producer,
            expire_open_transactions=bugs.producer_expiry_ignores_open_transactions,
        )
        self.index_entries_restored = 0  # aborted-index entries the last load re-created
        self.verification = VerificationState()  # KIP-890 part 1, in memory only
        # producer id -> the transactional id whose transactional batches it wrote here (a
        # producer id belongs to one transactional id for good); in memory only.
        self.owners: dict[int, str] = {}
        self._load_producer_state()
        self.log.on_roll = self._on_roll

    def _on_roll(self, base_offset: int) -> None:
        # Every batch below the new segment is in the producer state by now.
        self.producer_state.take_snapshot(base_offset)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leo={self.log_end_offset})"

    def _load_producer_state(self) -> None:
        """Newest snapshot <= log end, then replay the batch headers after it."""
        end = self.log.log_end_offset
        start = self.producer_state.load_snapshot(end)
        self.index_entries_restored = 0
        for seg, pos, header in self.log.scan(start or 0):
            if header.is_control:
                try:
                    commit, coordinator_epoch = parse_control_record(seg.read_at(pos, header.size))
                except CorruptBatch:
                    continue  # not a transaction marker (e.g. leader change)
                self._apply_marker(
                    seg, header, commit, coordinator_epoch, header.max_timestamp, replay=True
                )
            else:
                self.producer_state.append_data_batch(
                    header, header.base_offset, header.last_offset
                )
        self.producer_state.map_end_offset = end

    def _apply_marker(
        self,
        seg: LogSegment,
        header: BatchHeader,
        commit: bool,
        coordinator_epoch: int,
        timestamp: int,
        *,
        replay: bool,
    ) -> None:
        """Complete the producer's transaction for a marker in ``seg``; index an abort.

        On replay the entry is only added if the index does not have it yet (it is
        missing when the process died between the marker append and the index append).
        """
        pid, offset = header.producer_id, header.base_offset
        lso = self.producer_state.last_stable_offset_after(pid, offset)
        done = self.producer_state.complete_txn(
            pid, header.producer_epoch, commit, coordinator_epoch, offset, timestamp
        )
        if done is None or not done.is_aborted:
            return
        last = seg.txn_index.last_offset
        if replay and last is not None and last >= offset:
            return
        seg.txn_index.append(AbortedTxn(pid, done.first_offset, offset, lso))
        if replay:
            self.index_entries_restored += 1

    # -- metrics / offsets -------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None or self.bugs.lso_ignores_open_transactions:
            return hw
        return min(hw, max(first_unstable, self.log_start_offset))

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def producer_count(self) -> int:
        return self.producer_state.producer_count

    @property
    def open_transaction_count(self) -> int:
        return self.producer_state.open_transaction_count

    @property
    def oldest_open_transaction_start_ms(self) -> int:
        """Max timestamp of the batch that opened the oldest open transaction; -1 if none."""
        entry = self.producer_state.oldest_open_transaction()
        return -1 if entry is None else entry.current_txn_start_timestamp

    @property
    def longest_open_transaction_start_ms(self) -> int:
        """Start timestamp of the open transaction that has run longest; -1 if none
        (what PartitionsWithLateTransactionsCount measures, as KIP-664 defines it)."""
        return self.producer_state.earliest_open_transaction_start()

    @property
    def oldest_open_transaction_last_timestamp_ms(self) -> int:
        """Last timestamp of the producer of the oldest open transaction; -1 if none.

        Kafka's hasLateTransaction uses this one: late when
        now - it > transaction.max.timeout.ms + 5 min.
        """
        entry = self.producer_state.oldest_open_transaction()
        return -1 if entry is None else entry.last_timestamp

    # -- WriteTxnMarkers -----------------------------------------------------------
    def write_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        transaction_version: int = 0,
        admin: bool = False,
    ) -> int:
        """Validate and append a COMMIT/ABORT marker for ``producer_id``; error code.

        The marker is written even if the producer has no open transaction here (as
        Kafka does); it then completes nothing and leaves the LSO as it is. ``admin``:
        an operator's abort (KIP-664), which needs an open transaction.
        """
        marker = TxnMarker(
            producer_id, producer_epoch, coordinator_epoch, commit, transaction_version, admin
        )
        return self.write_txn_markers([marker])[0]

    def write_txn_markers(self, markers: list[TxnMarker]) -> list[int]:
        """``write_txn_marker`` for several markers in order (one error code each), the
        markers of different producers written to the log together.

        One WriteTxnMarkers request carries the markers of several transactions (one
        per producer id), often for the same partitions: appending a partition's
        markers in one write instead of one each saves a system call per marker. The
        outcome is that of writing them one after the other: a producer's marker is
        validated against its own state only, which the markers of other producers do
        not change, and the markers are applied to the producer state in order after
        the write (a second marker of the same producer starts a new group).
        """
        codes = [NONE] * len(markers)
        group: list[int] = []
        pids: set[int] = set()
        for i, m in enumerate(markers):
            if m.producer_id in pids:
                self._append_markers(markers, group, codes)
                group, pids = [], set()
            if m.admin:
                verdict = self.producer_state.validate_admin_marker(
                    m.producer_id, m.producer_epoch, m.coordinator_epoch
                )
            else:
                verdict = self.producer_state.validate_marker(
                    m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_version
                )
            if verdict.error_code != NONE:
                codes[i] = verdict.error_code
                continue
            group.append(i)
            pids.add(m.producer_id)
        self._append_markers(markers, group, codes)
        return codes

    def _append_markers(self, markers: list[TxnMarker], group: list[int], codes: list[int]) -> None:
        """Append the validated markers ``markers[i] for i in group`` and apply each to
        the producer state: in one write when the active segment takes them all, else
        one by one (as ``write_txn_marker`` did)."""
        if not group:
            return
        now_ms = int(self._clock() * 1000)
        if len(group) > 1:
            base = self.log.log_end_offset
            batches = [
                self._marker_batch(markers[i], now_ms, base + k) for k, i in enumerate(group)
            ]
            headers = [parse_header(batch) for batch in batches]
            try:
                together = self.log.append_parsed_together(batches, headers)
            except OSError:
                for i in group:
                    codes[i] = KAFKA_STORAGE_ERROR
                return
            if together:
                for i, written in zip(group, headers, strict=True):
                    codes[i] = self._apply_written_marker(markers[i], written, now_ms)
                return
        for i in group:
            batch = self._marker_batch(markers[i], now_ms, self.log.log_end_offset)
            written = parse_header(batch)
            try:
                self.log.append_parsed(batch, written)
            except OSError:
                codes[i] = KAFKA_STORAGE_ERROR
                continue
            codes[i] = self._apply_written_marker(markers[i], written, now_ms)

    def _marker_batch(self, m: TxnMarker, now_ms: int, offset: int) -> bytes:
        return build_control_batch(
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch,
            m.commit,
            now_ms,
            base_offset=offset,
            partition_leader_epoch=self.leader_epoch,
        )

    def _apply_written_marker(self, m: TxnMarker, written: BatchHeader, now_ms: int) -> int:
        self.verification.marker(m.producer_id, m.producer_epoch)  # may void one in flight
        seg = self.log.segment_for(written.base_offset)
        try:
            self._apply_marker(seg, written, m.commit, m.coordinator_epoch, now_ms, replay=False)
        except OSError as exc:
            # The marker is in the log; the entry is restored by the replay on the
            # next open. Producer state was completed before the index append failed;
            # the directory goes offline, so nothing is served from that state.
            self.log.log_dir.fail(f"indexing an abort marker of {self.directory.name}", exc)
            return KAFKA_STORAGE_ERROR
        return NONE

    # -- Produce -----------------------------------------------------------------
    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producer_state.last_entry(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        )

    def has_newer_epoch(self, producer_id: int, producer_epoch: int) -> bool:
        """This partition has seen the producer at a later epoch: a batch at
        ``producer_epoch`` is a zombie's, to be fenced rather than sequence-checked."""
        entry = self.producer_state.last_entry(producer_id)
        return entry is not None and entry.producer_epoch > producer_epoch

    def start_verification(
        self, producer_id: int, producer_epoch: int, epoch_bump: bool = False
    ) -> VerificationGuard:
        """SENTINEL when the producer's transaction is ongoing here (nothing to ask),
        else the guard of a verification the caller now asks the coordinator for
        (``epoch_bump``: a TV2 client's, whose transaction's markers carry epoch + 1)."""
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return SENTINEL
        now_ms = int(self._clock() * 1000)
        return self.verification.start(producer_id, producer_epoch, now_ms, epoch_bump=epoch_bump)

    def append_records(
        self,
        records: bytes | bytearray | memoryview,
        verification: VerificationGuard | None = None,
        transactional_id: str | None = None,
    ) -> AppendResult:
        """Validate and append the single batch of a Produce request (v3+).

        ``verification``: None when this produce needs no verification (it is off, or
        the request is not transactional); else the guard from ``start_verification``,
        which must still be valid for a transactional batch that opens a transaction.
        """
        if not self.log.online:
            return AppendResult(KAFKA_STORAGE_ERROR, self.log.log_dir.failure)
        check = validate_client_batch(records, self.config)
        if check.header is None:
            start = -1 if check.error_code in _NO_LOG_START_ERRORS else self.log_start_offset
            return AppendResult(
                check.error_code,
                check.message,
                log_start_offset=start,
                record_errors=list(check.record_errors),
            )
        header = check.header
        if header.is_transactional and transactional_id is not None:
            owner = self.owners.get(header.producer_id)
            if owner is not None and owner != transactional_id:
                # Another transactional id's producer: its batch must not join (or open)
                # that producer's transaction (issue 35: a principal with WRITE on some
                # transactional id wrote into another principal's transaction).
                return AppendResult(
                    INVALID_PRODUCER_ID_MAPPING,
                    f"producer id {header.producer_id} belongs to another transactional id",
                    log_start_offset=self.log_start_offset,
                )
        verdict = self.producer_state.validate(header)
        if verdict.duplicate is not None:
            dup = verdict.duplicate
            return AppendResult(
                NONE,
                None,
                dup.first_offset,
                dup.last_offset,
                log_start_offset=self.log_start_offset,
                duplicate=True,
            )
        if (
            verification is not None
            and header.is_transactional
            and header.has_producer_id
            and not self.has_ongoing_transaction(header.producer_id, header.producer_epoch)
            and not self.verification.verified(header.producer_id, verification)
        ):
            return AppendResult(
                INVALID_TXN_STATE,
                "Record was not part of an ongoing transaction",
                log_start_offset=self.log_start_offset,
            )
        if verdict.error_code != NONE:
            return AppendResult(
                verdict.error_code, verdict.message, log_start_offset=self.log_start_offset
            )
        base = self.log.log_end_offset
        buf = bytearray(records)
        set_base_offset(buf, 0, base)
        set_partition_leader_epoch(buf, 0, self.leader_epoch)
        if check.max_timestamp != header.max_timestamp:
            # Kafka's LogValidator sets it to the largest record timestamp: the time index
            # and ListOffsets must not trust a client's header over its records
            set_max_timestamp(buf, 0, header.size, check.max_timestamp)
        written = parse_header(buf)
        try:
            self.log.append_parsed(buf, written)
        except OSError as e:
            return AppendResult(KAFKA_STORAGE_ERROR, f"append failed: {e}")
        self.producer_state.append_data_batch(written, base, written.last_offset)
        if transactional_id is not None and written.is_transactional:
            self.owners[written.producer_id] = transactional_id
        if verification is not None and written.is_transactional:
            self.verification.clear(written.producer_id)  # the transaction is ongoing now
        return AppendResult(
            NONE, None, base, written.last_offset, log_start_offset=self.log_start_offset
        )

    # -- Fetch -------------------------------------------------------------------
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int = READ_UNCOMMITTED,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one containing ``fetch_offset`` (bounded by the LSO
        under read_committed). Out of range: error 1 with -1 offsets, as Kafka."""
        lso = self.last_stable_offset
        committed = isolation_level == READ_COMMITTED
        try:
            records = self.log.read(
                fetch_offset, max_bytes, min_one_batch, lso if committed else None
            )
            aborted: list[tuple[int, int]] = []
            if committed and records and not self.bugs.fetch_ignores_aborted_index:
                upper = _next_offset(records)
                aborted = [
                    (e.producer_id, e.first_offset)
                    for e in self.log.collect_aborted_transactions(fetch_offset, upper)
                ]
        except OffsetOutOfRange:
            return ReadResult(OFFSET_OUT_OF_RANGE)
        except OSError:
            return ReadResult(KAFKA_STORAGE_ERROR)
        return ReadResult(NONE, records, self.high_watermark, lso, self.log_start_offset, aborted)

    # -- ListOffsets -------------------------------------------------------------
    def list_offset(
        self, timestamp: int, isolation_level: int = READ_UNCOMMITTED
    ) -> tuple[int, int, int]:
        """(error, offset, timestamp) for -2 earliest, -1 latest, -3 max timestamp,
        -4 earliest local, or a real timestamp (offset -1 if none)."""
        if not self.log.online:
            return KAFKA_STORAGE_ERROR, -1, -1
        fetchable = (
            self.last_stable_offset if isolation_level == READ_COMMITTED else self.high_watermark
        )
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return NONE, self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return NONE, fetchable, -1
        if timestamp == MAX_TIMESTAMP:
            found = self.log.max_timestamp()
        elif timestamp >= 0:
            found = self.log.offset_for_timestamp(timestamp)
        else:
            found = None
        if found is not None and found[0] >= fetchable:
            found = None  # past what the isolation level may read (Kafka, max timestamp too)
        if found is None:
            return NONE, -1, -1
        return NONE, found[0], found[1]

    # -- DeleteRecords -----------------------------------------------------------
    def delete_records(self, offset: int) -> tuple[int, int]:
        """(error, low watermark). ``offset`` -1 means the high watermark."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            return OFFSET_OUT_OF_RANGE, -1
        try:
            return NONE, self.log.delete_records_before(offset)
        except OSError:
            return KAFKA_STORAGE_ERROR, -1

    # -- housekeeping ------------------------------------------------------------
    def apply_retention(self, now_ms: int | None = None) -> int:
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        return self.log.apply_retention(now)

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        self.verification.expire(now, self.producer_state.producer_id_expiration_ms)
        removed = self.producer_state.remove_expired(now)
        for pid in removed:
            self.owners.pop(pid, None)
        return removed

    def take_snapshot(self) -> Path:
        return self.producer_state.take_snapshot(self.log_end_offset)

    def truncate_to(self, offset: int) -> None:
        """Cut the log at ``offset`` and rebuild producer state from snapshots + log."""
        self.log.truncate_to(offset)
        self.producer_state.delete_snapshots_after(self.log_end_offset)
        self._load_producer_state()

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        if self.log.online:
            self.take_snapshot()
        self.log.close()

    def delete(self) -> None:
        """Remove the partition's directory (topic deletion)."""
        self.log.delete()
