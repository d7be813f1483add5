"""The transaction coordinator: transactional ids, their producer ids and epochs, and
the two-phase completion of their transactions.

Behaviour follows Apache Kafka's TransactionCoordinator / TransactionStateManager /
TransactionMarkerChannelManager for transaction.version 0/1 clients (librdkafka):

* InitProducerId fences the previous producer instance with an epoch bump; an open
  transaction is aborted first (PrepareEpochFence -> PrepareAbort with the bumped
  epoch; the client gets CONCURRENT_TRANSACTIONS and retries). KIP-360: a request
  carrying the producer id/epoch it knows bumps only if they are current, returns the
  current epoch on a retry of a bump already done, and is fenced otherwise. An
  exhausted epoch (Short.MaxValue - 1) moves the id onto a new producer id.
* AddPartitionsToTxn / AddOffsetsToTxn move Empty/Complete* to Ongoing.
* EndTxn writes PrepareCommit/PrepareAbort, answers, sends the markers, and writes
  CompleteCommit/CompleteAbort once every partition has its marker. The next
  transaction starts from Complete* directly (Kafka writes no Empty in between), so a
  retried EndTxn after completion still finds its outcome.
* KIP-890 part 2 (a client on transaction.version 2, EndTxn v5+): every EndTxn bumps
  the epoch, the markers carry the bumped epoch and the answer carries the producer id
  and epoch to use next; at the last epoch the answer (and CompleteX) moves onto a new
  producer id. A retry whose answer was lost is recognised by epoch + 1 (or by the
  previous producer id after an overflow) and gets the same answer, also after a
  restart (those fields are persisted).
* A periodic task aborts Ongoing transactions older than their timeout (with an epoch
  bump, so the zombie producer is fenced) and another expires idle transactional ids.

Everything runs on the event loop; a state change is computed, appended to the
partition's state log and only then applied and answered, never interleaved with
another change of the same id (the only awaits happen before: allocating producer ids).
On load, a partition's coordinator epoch is bumped and persisted first, and every
transaction found in PrepareCommit/PrepareAbort resumes sending its markers (so a
coordinator killed between PrepareCommit and the markers completes the commit when it
comes back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ...features import writes_tv2_records
from ...storage.state_log import Record, StateLog
from ..groups.hashing import partition_for
from ..partition_lifecycle import PartitionLifecycle
from . import store
from .config import TxnConfig
from .marker_sender import (
    GROUP_TOPIC,
    MarkerRouting,
    MarkerSender,
    MarkerSpec,
    MarkerTransport,
    Outcome,
)
from .metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TWO_PC_TIMEOUT_MS,
    EpochError,
    EpochOverflow,
    TopicPartition,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from .state import RESTING_STATES, TxnState

log = logging.getLogger(__name__)

S = TxnState
NONE = 0


class ProducerIdSource(Protocol):
    """Hands out producer ids that are never reused (``ProducerIdBlocks``)."""

    async def next_id(self) -> int: ...


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class InitResult:
    """InitProducerId's answer; v6 (KIP-939) adds the transaction a keep-prepared init
    kept open (OngoingTxnProducerId/Epoch, -1 if none)."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    ongoing_producer_id: int = NO_PRODUCER_ID
    ongoing_producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndResult:
    """EndTxn's answer; v5+ (TV2) sends the producer id and epoch to use next."""

    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class _NeedsProducerId:
    """A TV2 EndTxn at the last epoch: allocate the next producer id, then decide again."""


_NEEDS_PRODUCER_ID = _NeedsProducerId()


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """DescribeTransactions' view of one transactional id, plus coordinator internals."""

    error: int
    transactional_id: str
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    last_update_time_ms: int = -1
    pending_state: str | None = None
    coordinator_epoch: int = -1
    pending_markers: tuple[TopicPartition, ...] = ()
    client_transaction_version: int = 0
    two_phase_commit: bool = False


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListResult:
    error: int
    transactions: tuple[ListedTransaction, ...] = ()
    unknown_state_filters: tuple[str, ...] = ()


@dataclass(slots=True)
class _Inflight:
    """A PrepareX transaction whose markers are being written."""

    spec: MarkerSpec
    remaining: set[TopicPartition]
    dropped: set[TopicPartition] = field(default_factory=set)


@dataclass(slots=True)
class TxnCounters:
    """Monotonic counters for the metrics layer."""

    transactions_started: int = 0
    transactions_committed: int = 0
    transactions_aborted: int = 0
    transactions_timed_out: int = 0
    transactions_fenced: int = 0
    """Open transactions aborted because a new producer instance initialised."""
    producers_fenced: int = 0
    """InitProducerId calls that bumped the epoch of an existing producer instance."""
    producer_id_rotations: int = 0
    transactional_ids_expired: int = 0
    log_append_failures: int = 0


class TransactionCoordinator:
    """Transactional ids over ``config.num_partitions`` internal partitions (Kafka's
    ``__transaction_state``) persisted under ``data_dir``.

    ``producer_ids``: where new producer ids come from (``ProducerIdBlocks``).
    ``marker_transport`` / ``marker_routing``: how markers reach the nodes leading the
    partitions (``PeerMarkerTransport`` / ``ViewRouting`` in a node).
    ``partition_exists(topic, partition)``: AddPartitionsToTxn refuses unknown partitions.
    ``clock_ms``: wall-clock milliseconds (transaction timestamps are persisted and
    reported, so they must survive restarts).
    ``transaction_version``: the cluster's finalized transaction.version, read when
    needed (it changes at run time). It picks the transaction-log value version and
    the epoch rule of aborts the coordinator starts itself (timeouts, fencing).
    None: not known; those aborts then follow the client's recorded version, and
    value version 1 is written only for records that need it. (A client's EndTxn is
    judged by its own request version, as Kafka does.)
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        producer_ids: ProducerIdSource,
        marker_transport: MarkerTransport,
        marker_routing: MarkerRouting,
        partition_exists: Callable[[str, int], bool],
        config: TxnConfig | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        marker_clock_ms: Callable[[], int] | None = None,
        transaction_version: Callable[[], int] | None = None,
    ) -> None:
        self.config = config or TxnConfig()
        self._partitions = PartitionLifecycle(data_dir, self.config.num_partitions, self._open_log)
        self.data_dir = self._partitions.data_dir
        self.producer_ids = producer_ids
        self.partition_exists = partition_exists
        self.clock_ms = clock_ms
        self.transaction_version = transaction_version
        self.markers = MarkerSender(
            marker_transport,
            marker_routing,
            self._on_marker_done,
            clock_ms=marker_clock_ms,
            retry_backoff_ms=self.config.marker_retry_backoff_ms,
            max_backoff_ms=self.config.marker_max_backoff_ms,
            max_in_flight=self.config.marker_max_in_flight,
        )
        self.counters = TxnCounters()
        self._txns: dict[str, TransactionMetadata] = {}
        self._epochs: dict[int, int] = {}
        self._inflight: dict[str, _Inflight] = {}
        self._unwritten_completions: set[str] = set()
        # requests held until a completing transaction settles (``wait_if_completing``)
        self._settled: dict[str, list[asyncio.Future[None]]] = {}
        self._partition_of: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ partitions / life

    @property
    def num_partitions(self) -> int:
        return self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        """The internal partition of a transactional id: Kafka's abs(hashCode) % n."""
        p = self._partition_of.get(transactional_id)
        if p is None:
            p = partition_for(transactional_id, self.num_partitions)
            if len(self._partition_of) >= 100_000:
                self._partition_of.clear()  # a cache, not state: bound it
            self._partition_of[transactional_id] = p
        return p

    def owns(self, transactional_id: str) -> bool:
        return self._partitions.is_loaded(self.partition_for(transactional_id))

    @property
    def loaded_partitions(self) -> frozenset[int]:
        return self._partitions.loaded

    def coordinator_epoch(self, partition: int) -> int | None:
        return self._epochs.get(partition) if self._partitions.is_loaded(partition) else None

    def coordinator_error(self, transactional_id: str) -> int:
        """NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / NONE for this id here."""
        return self._partitions.error(self.partition_for(transactional_id))

    def _open_log(self, data_dir: Path, partition: int) -> StateLog:
        return store.open_log(
            data_dir,
            partition,
            fsync=self.config.fsync,
            compact_min_bytes=self.config.compact_min_bytes,
        )

    def load_partition(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Become coordinator for one internal partition: replay its log, bump and persist
        its coordinator epoch (at least ``coordinator_epoch`` if given), then resume the
        markers of every transaction found in PrepareCommit/PrepareAbort."""
        if not self._partitions.load(
            partition, lambda slog: self._restore(partition, slog, coordinator_epoch)
        ):
            return
        epoch = self._epochs[partition]
        resumed = 0
        for txn_id, md in list(self._txns.items()):
            if (
                self.partition_for(txn_id) == partition
                and md.state.is_prepare
                and not self.config.bugs.coordinator_load_skips_pending_markers
            ):
                self._start_markers(md)
                resumed += 1
        log.info(
            "loaded transaction partition %d at coordinator epoch %d (%d transactions "
            "resume their markers)",
            partition,
            epoch,
            resumed,
        )

    def _restore(self, partition: int, slog: StateLog, coordinator_epoch: int | None) -> None:
        loaded = store.replay(slog)
        epoch = max(loaded.coordinator_epoch + 1, coordinator_epoch or 0)
        slog.append(store.epoch_record(epoch))
        self._epochs[partition] = epoch
        for txn_id, transit in loaded.transactions.items():
            if transit.state not in RESTING_STATES:
                log.error("%s: ignoring persisted state %s", txn_id, transit.state.value)
                continue
            self._txns[txn_id] = TransactionMetadata.restore(txn_id, transit)

    def unload_partition(self, partition: int) -> None:
        """Stop serving a partition: forget its ids and stop sending their markers."""
        self._partitions.unload(partition, lambda: self._forget_partition(partition))

    def _forget_partition(self, partition: int) -> None:
        self.markers.cancel_txn_partition(partition)
        for txn_id in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[txn_id]
            self._inflight.pop(txn_id, None)
            self._unwritten_completions.discard(txn_id)
        self._epochs.pop(partition, None)

    async def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load partitions (all unless told otherwise), start the marker sender and the
        periodic tasks whose intervals are non-zero."""
        for p in self._partitions.requested(partitions):
            self.load_partition(p)
        self.markers.start()
        if self.config.abort_timed_out_interval_ms > 0:
            self._tasks.append(
                asyncio.create_task(
                    self._periodic(
                        self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions
                    ),
                    name="txn-abort-timed-out",
                )
            )
        if self.config.remove_expired_interval_ms > 0:
            self._tasks.append(
                asyncio.create_task(
                    self._periodic(
                        self.config.remove_expired_interval_ms,
                        self.remove_expired_transactional_ids,
                    ),
                    name="txn-remove-expired",
                )
            )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.markers.stop()
        for p in sorted(self.loaded_partitions):
            self.unload_partition(p)

    async def _periodic(self, interval_ms: int, step: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                step()
            except Exception:
                log.exception("transaction coordinator periodic task failed")

    def register(self, registry: Any) -> None:
        """Register AddPartitionsToTxn, AddOffsetsToTxn and EndTxn on an ``ApiRegistry``
        (InitProducerId is registered separately on every node: ``InitProducerIdApi``)."""
        from .handlers import register_transaction_apis

        register_transaction_apis(self, registry)

    def server_transaction_version(self) -> int | None:
        """The finalized transaction.version, or None when nobody told us."""
        return None if self.transaction_version is None else int(self.transaction_version())

    def _fence_and_abort(self, md: TransactionMetadata, now: int) -> TxnTransit:
        return md.prepare_fence_and_abort(
            now,
            self._fence_transaction_version(md),
            overflow_bug=self.config.bugs.tv2_fence_epoch_overflow,
        )

    def _refuses_tv2(self, transit: TxnTransit) -> bool:
        """A transit that needs a version-1 value (a TV2 client's transaction version, or
        the NextProducerId a keep-prepared init records) at finalized level 0: its
        version-0 value could not carry it, so Kafka refuses the request
        (UNSUPPORTED_VERSION) and writes nothing. (Kafka 4.4.0 also leaves the id's
        pending transition set, answering CONCURRENT_TRANSACTIONS to everything after;
        here nothing changes, so the id stays usable by a TV0/TV1 client.)"""
        return transit.needs_value_v1 and not (
            writes_tv2_records(self.server_transaction_version())
        )

    def _fence_transaction_version(self, md: TransactionMetadata) -> int:
        """The version an abort started by the coordinator follows: the cluster's (as
        Kafka), or, while that is unknown, the one the client last used."""
        level = self.server_transaction_version()
        return md.client_transaction_version if level is None else level

    # ------------------------------------------------------------------ persistence

    def _append(self, txn_id: str, records: list[Record]) -> bool:
        slog = self._partitions.log(self.partition_for(txn_id))
        if slog is None:
            return False
        try:
            slog.append_batch(records)
        except OSError:
            self.counters.log_append_failures += 1
            log.exception("%s: appending to the transaction log failed", txn_id)
            return False
        return True

    def _maybe_compact(self, partition: int) -> None:
        slog = self._partitions.log(partition)
        if slog is None or not slog.needs_compaction():
            return
        live = {
            tid: md.snapshot()
            for tid, md in self._txns.items()
            if self.partition_for(tid) == partition
        }
        try:
            slog.compact(
                store.live_records(self._epochs[partition], live, self.server_transaction_version())
            )
        except OSError:
            log.exception("compaction of transaction partition %d failed", partition)

    def _commit(self, md: TransactionMetadata, transit: TxnTransit) -> bool:
        """Persist a transit, then apply it (and register a new id). False: not persisted,
        nothing changed."""
        txn_id = md.transactional_id
        record = store.txn_record(txn_id, transit, self.server_transaction_version())
        if not self._append(txn_id, [record]):
            return False
        md.apply(transit)
        self._txns[txn_id] = md
        self._maybe_compact(self.partition_for(txn_id))
        return True

    # ------------------------------------------------------------------ InitProducerId

    def validate_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        expected: tuple[int, int] | None = None,
        *,
        enable_two_phase_commit: bool = False,
        keep_prepared_txn: bool = False,
    ) -> InitResult:
        """InitProducerId. ``expected`` is the (producer id, epoch) the client knows
        (KIP-360, v3+); None for a new producer instance. Returns PRODUCER_FENCED for a
        stale producer (the handler maps it to INVALID_PRODUCER_EPOCH below v4).

        KIP-939 (v6): ``enable_two_phase_commit`` makes the id's transactions never time
        out (the requested timeout is ignored); refused with
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED while ``transaction.two.phase.commit.enable``
        is off. ``keep_prepared_txn`` keeps an open transaction instead of aborting it
        (allowed without 2PC too, as the seed says) and answers with its producer id and
        epoch besides the new instance's."""
        if transactional_id is None:
            try:
                return InitResult(NONE, await self.producer_ids.next_id(), 0)
            except Exception:
                log.exception("allocating a producer id failed")
                return InitResult(int(E.coordinator_load_in_progress))
        if not transactional_id:
            return InitResult(int(E.invalid_request))
        if enable_two_phase_commit and not self.config.two_phase_commit_enable:
            return InitResult(int(E.transactional_id_authorization_failed))
        if enable_two_phase_commit:
            timeout_ms = TWO_PC_TIMEOUT_MS
        elif not self.validate_timeout(timeout_ms):
            return InitResult(int(E.invalid_transaction_timeout))
        err = self.coordinator_error(transactional_id)
        if err:
            return InitResult(err)
        md = self._txns.get(transactional_id)
        fresh_pid: int | None = None
        keep_needs_pid = (
            md is not None
            and keep_prepared_txn
            and md.state == S.ONGOING
            and is_epoch_exhausted(md.client_ids[1])
        )
        if (
            md is None
            or (md.is_epoch_exhausted and not md.state.has_open_transaction)
            or keep_needs_pid
        ):
            try:
                fresh_pid = await self.producer_ids.next_id()
            except Exception:
                log.exception("allocating a producer id failed")
                return InitResult(int(E.coordinator_load_in_progress))
            # The world may have moved while we waited.
            err = self.coordinator_error(transactional_id)
            if err:
                return InitResult(err)
            md = self._txns.get(transactional_id)
        if md is None:
            assert fresh_pid is not None
            md = TransactionMetadata(
                transactional_id,
                fresh_pid,
                txn_timeout_ms=timeout_ms,
                txn_last_update_ms=self.clock_ms(),
            )
            fresh_pid = None
        return self._init(
            md, timeout_ms, expected, fresh_pid, enable_two_phase_commit, keep_prepared_txn
        )

    def _init(
        self,
        md: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        fresh_pid: int | None,
        two_phase: bool = False,
        keep_prepared: bool = False,
    ) -> InitResult:
        if expected is not None and not _is_valid_producer_id(md, expected):
            return InitResult(int(E.producer_fenced))
        if md.pending_transition_in_progress or md.state.is_prepare:
            return InitResult(int(E.concurrent_transactions))
        now = self.clock_ms()
        if keep_prepared and self.config.bugs.init_aborts_prepared_transaction:
            keep_prepared = False
        if md.state == S.ONGOING and keep_prepared:
            return self._keep_prepared(md, timeout_ms, fresh_pid, two_phase, now)
        if md.state == S.ONGOING:
            # Abort the open transaction with a bumped epoch (never returned: the client
            # retries after CONCURRENT_TRANSACTIONS and bumps again).
            try:
                transit = self._fence_and_abort(md, now)
            except EpochOverflow as exc:
                log.error("InitProducerId cannot abort the open transaction: %s", exc)
                return InitResult(int(E.unknown_server_error))
            err = self._begin_completion(md, transit)
            if err:
                return InitResult(err)
            self.counters.transactions_fenced += 1
            return InitResult(int(E.concurrent_transactions))
        if not md.state.can_start_transaction:
            raise RuntimeError(f"{md.transactional_id}: unexpected state {md.state.value}")
        rotate = md.is_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch)
        if rotate:
            if fresh_pid is None:
                return InitResult(int(E.concurrent_transactions))
            transit = md.prepare_producer_id_rotation(
                fresh_pid,
                timeout_ms,
                now,
                record_last_epoch=expected is not None,
                two_phase_commit=two_phase,
            )
        else:
            try:
                transit = md.prepare_increment_epoch(
                    timeout_ms, None if expected is None else expected[1], now, two_phase
                )
            except EpochError as exc:
                log.info("%s: InitProducerId fenced: %s", md.transactional_id, exc)
                return InitResult(int(E.producer_fenced))
        fences = expected is None and md.producer_epoch >= 0
        if not self._commit(md, transit):
            return InitResult(int(E.coordinator_not_available))
        if fences:
            self.counters.producers_fenced += 1
        if rotate:
            self.counters.producer_id_rotations += 1
        log.info(
            "%s: initialised producer id %d epoch %d",
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
        )
        return InitResult(NONE, md.producer_id, md.producer_epoch)

    def _keep_prepared(
        self,
        md: TransactionMetadata,
        timeout_ms: int,
        fresh_pid: int | None,
        two_phase: bool,
        now: int,
    ) -> InitResult:
        """KIP-939: keep the open transaction; the new instance gets the next epoch."""
        if is_epoch_exhausted(md.client_ids[1]) and fresh_pid is None:
            return InitResult(int(E.concurrent_transactions))  # the client retries
        transit = md.prepare_keep_prepared(fresh_pid, timeout_ms, now, two_phase)
        if self._refuses_tv2(transit):
            return InitResult(int(E.unsupported_version))
        if not self._commit(md, transit):
            return InitResult(int(E.coordinator_not_available))
        self.counters.producers_fenced += 1
        log.info(
            "%s: kept the transaction of producer %d epoch %d open for producer %d epoch %d",
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            md.next_producer_id,
            md.next_producer_epoch,
        )
        return InitResult(
            NONE, md.next_producer_id, md.next_producer_epoch, md.producer_id, md.producer_epoch
        )

    # ------------------------------------------------------------------ AddPartitions

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> int:
        if not transactional_id:
            return int(E.invalid_request)
        err = self.coordinator_error(transactional_id)
        if err:
            return err
        md = self._txns.get(transactional_id)
        if md is None:
            return int(E.invalid_producer_id_mapping)
        client_pid, client_epoch = md.client_ids
        if client_pid != producer_id:
            return int(E.invalid_producer_id_mapping)
        at_max = epoch >= MAX_EPOCH and not self.config.bugs.tv2_abort_retry_hands_out_max_epoch
        if client_epoch != epoch or at_max:
            # The coordinator never hands out MAX_EPOCH (only a fence reaches it); with the
            # KAFKA-20090 switch it did, and a transaction starts there as on 4.0.1-4.2.2.
            return int(E.producer_fenced)
        return NONE

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        client_transaction_version: int | None = None,
    ) -> int:
        """AddPartitionsToTxn for one transaction: one error for all partitions.

        Stale epoch -> PRODUCER_FENCED (handlers map it to INVALID_PRODUCER_EPOCH below
        v2); a transaction still completing -> CONCURRENT_TRANSACTIONS.
        ``client_transaction_version``: recorded with a transaction that starts or
        grows (the broker's implicit add for a TV2 producer passes 2); None keeps it.
        """
        err = self._check_producer(transactional_id, producer_id, producer_epoch)
        if err:
            return err
        md = self._txns[transactional_id]
        wanted = set(partitions)
        if md.pending_transition_in_progress or md.state.is_prepare:
            return int(E.concurrent_transactions)
        if md.state == S.ONGOING and wanted <= md.partitions:
            return NONE
        starting = md.state.can_start_transaction
        transit = md.prepare_add_partitions(wanted, self.clock_ms(), client_transaction_version)
        if self._refuses_tv2(transit):
            return int(E.unsupported_version)
        if not self._commit(md, transit):
            return int(E.coordinator_not_available)
        if starting:
            self.counters.transactions_started += 1
        return NONE

    def group_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition of a group (as the group coordinator hashes)."""
        return (GROUP_TOPIC, partition_for(group_id, self.config.offsets_num_partitions))

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> int:
        """AddOffsetsToTxn: add the group's offsets partition to the transaction."""
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [self.group_partition(group_id)]
        )

    # ------------------------------------------------------------------ EndTxn

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        """EndTxn v0-v4 (a client on transaction.version 0/1): the same epoch.

        Ongoing -> PrepareX persisted and answered NONE; markers follow. A retry that
        finds the same outcome completed answers NONE; still being completed,
        CONCURRENT_TRANSACTIONS (the client retries); a different outcome or an Empty
        transaction, INVALID_TXN_STATE.
        """
        err = self._check_producer(transactional_id, producer_id, producer_epoch)
        if err:
            return err
        md = self._txns[transactional_id]
        if md.pending_transition_in_progress:
            return int(E.concurrent_transactions)
        state = md.state
        if state == S.ONGOING:
            return self._begin_completion(md, md.prepare_end(commit, self.clock_ms()))
        if state == S.COMPLETE_COMMIT:
            return NONE if commit else int(E.invalid_txn_state)
        if state == S.COMPLETE_ABORT:
            return NONE if not commit else int(E.invalid_txn_state)
        if state == S.PREPARE_COMMIT:
            return int(E.concurrent_transactions) if commit else int(E.invalid_txn_state)
        if state == S.PREPARE_ABORT:
            return int(E.concurrent_transactions) if not commit else int(E.invalid_txn_state)
        return int(E.invalid_txn_state)  # Empty

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int = 0,
    ) -> EndResult:
        """EndTxn of any version: ``client_transaction_version`` 2 (EndTxn v5+) takes the
        KIP-890 part 2 rules (:meth:`_end_txn_tv2`), below it :meth:`end_txn`."""
        if not supports_epoch_bump(client_transaction_version):
            return EndResult(self.end_txn(transactional_id, producer_id, producer_epoch, commit))
        tv = client_transaction_version
        decided = self._end_txn_tv2(transactional_id, producer_id, producer_epoch, commit, tv, None)
        if not isinstance(decided, _NeedsProducerId):
            return decided
        try:
            next_pid = await self.producer_ids.next_id()
        except Exception:
            log.exception("allocating a producer id failed")
            return EndResult(int(E.coordinator_load_in_progress))
        # The world may have moved while we waited: decide again, with the id in hand.
        decided = self._end_txn_tv2(
            transactional_id, producer_id, producer_epoch, commit, tv, next_pid
        )
        assert not isinstance(decided, _NeedsProducerId)
        return decided

    def _end_txn_tv2(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int,
        next_pid: int | None,
    ) -> EndResult | _NeedsProducerId:
        """EndTxn v5+ (KIP-890 part 2; Kafka 4.x's ``endTransaction`` for TV2).

        The epoch a request carries tells a new end (the current epoch) from a retry of
        one already done (epoch + 1 is stored, or, after an overflow, the previous
        producer id with the last epoch and the new id at epoch 0)::

                            abort             commit
                          retry  current    retry  current
            Empty          FENCED  bump     FENCED  INVALID_TXN_STATE
            CompleteAbort  NONE    bump     ITS     ITS
            CompleteCommit ITS     bump     NONE    ITS

        (bump: PrepareAbort with a new epoch and no partitions). Ongoing with the
        current epoch -> PrepareX at epoch + 1; PrepareX -> CONCURRENT_TRANSACTIONS for
        a retry of the same outcome. Any other epoch is PRODUCER_FENCED.
        """
        if not transactional_id:
            return EndResult(int(E.invalid_request))
        err = self.coordinator_error(transactional_id)
        if err:
            return EndResult(err)
        md = self._txns.get(transactional_id)
        if md is None:
            return EndResult(int(E.invalid_producer_id_mapping))
        state = md.state
        if md.keeps_prepared:
            return self._end_kept_tv2(
                md, producer_id, producer_epoch, commit, client_transaction_version, next_pid
            )
        # Only an end written by a TV2 client (or a TV2 fence) bumped the epoch, so only
        # then can the stored epoch be the answer to a retried request.
        bumped = supports_epoch_bump(md.client_transaction_version)
        retry_on_overflow = (
            bumped
            and md.last_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and md.producer_epoch == 0
        )
        # Short.MaxValue is stored only by a fence at the last epoch (its zombie must not
        # pass for a retry) or by an end that moves onto ``next_producer_id``. The
        # KAFKA-20090 switch takes the fence's MAX for a retry's answer, as 4.0.1-4.2.2 did.
        retry_on_bump = (
            bumped
            and md.producer_epoch == producer_epoch + 1
            and (
                md.producer_epoch < MAX_EPOCH
                or md.next_producer_id != NO_PRODUCER_ID
                or self.config.bugs.tv2_abort_retry_hands_out_max_epoch
            )
        )
        # A retry of a keep-prepared instance's end onto its own producer id (KIP-939).
        retry_kept = (
            state.is_prepare
            and md.next_producer_id == producer_id != md.producer_id
            and md.last_producer_id == producer_id
            and md.last_producer_epoch == producer_epoch
        )
        if state.is_prepare:
            valid_epoch = retry_on_bump or retry_kept
        elif state.is_complete:
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
        else:  # Ongoing, Empty
            valid_epoch = producer_epoch == md.producer_epoch
        if md.producer_id != producer_id and not (retry_on_overflow or retry_kept):
            return EndResult(int(E.invalid_producer_id_mapping))
        if md.pending_transition_in_progress and not state.is_prepare:
            # (PrepareX with markers in flight is Kafka's resting PrepareX: judged below.)
            return EndResult(int(E.concurrent_transactions))
        if not valid_epoch or producer_epoch >= MAX_EPOCH:
            # The coordinator never hands out MAX_EPOCH (only a fence reaches it).
            return EndResult(int(E.producer_fenced))
        is_retry = retry_on_bump or retry_on_overflow or retry_kept
        if state == S.ONGOING:
            return self._end_tv2(md, commit, client_transaction_version, next_pid)
        if state == S.PREPARE_COMMIT:
            return EndResult(int(E.concurrent_transactions if commit else E.invalid_txn_state))
        if state == S.PREPARE_ABORT:
            return EndResult(int(E.invalid_txn_state if commit else E.concurrent_transactions))
        same_outcome = (state == S.COMPLETE_COMMIT) == commit
        if state.is_complete and is_retry:
            if same_outcome:
                return EndResult(NONE, md.producer_id, md.producer_epoch)
            return EndResult(int(E.invalid_txn_state))
        if commit:  # Empty, or Complete* and not a retry: nothing to commit
            return EndResult(int(E.invalid_txn_state))
        # an abort with nothing added
        return self._end_tv2(md, commit, client_transaction_version, next_pid)

    def _end_kept_tv2(
        self,
        md: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int,
        next_pid: int | None,
    ) -> EndResult | _NeedsProducerId:
        """EndTxn v5+ for a transaction kept open by a keep-prepared init: only the
        instance holding the next producer id and epoch may end it."""
        client_pid, client_epoch = md.client_ids
        if producer_id != client_pid:
            return EndResult(int(E.invalid_producer_id_mapping))
        if producer_epoch != client_epoch:
            return EndResult(int(E.producer_fenced))
        if md.pending_transition_in_progress:
            return EndResult(int(E.concurrent_transactions))
        return self._end_tv2(md, commit, client_transaction_version, next_pid)

    def _end_tv2(
        self,
        md: TransactionMetadata,
        commit: bool,
        client_transaction_version: int,
        next_pid: int | None,
    ) -> EndResult | _NeedsProducerId:
        """Write PrepareX with the bumped epoch (onto a next producer id at the last
        epoch) and answer with what the client uses next."""
        exhausted = is_epoch_exhausted(md.client_ids[1])
        if exhausted and next_pid is None:
            return _NEEDS_PRODUCER_ID
        rotate_to = next_pid if exhausted and next_pid is not None else NO_PRODUCER_ID
        transit = md.prepare_end(commit, self.clock_ms(), client_transaction_version, rotate_to)
        if self._refuses_tv2(transit):
            return EndResult(int(E.unsupported_version))
        err = self._begin_completion(md, transit)
        if err:
            return EndResult(err)
        if transit.next_producer_id != NO_PRODUCER_ID:
            return EndResult(NONE, transit.next_producer_id, max(transit.next_producer_epoch, 0))
        return EndResult(NONE, transit.producer_id, transit.producer_epoch)

    # ------------------------------------------------------------------ completion

    def _begin_completion(self, md: TransactionMetadata, transit: TxnTransit) -> int:
        """Persist PrepareCommit/PrepareAbort, then start writing the markers."""
        if not self._commit(md, transit):
            return int(E.coordinator_not_available)
        self._start_markers(md)
        return NONE

    def _start_markers(self, md: TransactionMetadata) -> None:
        commit = md.state == S.PREPARE_COMMIT
        md.pending_state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        p = self.partition_for(md.transactional_id)
        spec = MarkerSpec(
            transactional_id=md.transactional_id,
            txn_partition=p,
            producer_id=md.producer_id,
            producer_epoch=md.producer_epoch,
            commit=commit,
            coordinator_epoch=self._epochs[p],
            transaction_version=md.client_transaction_version,
        )
        self._inflight[md.transactional_id] = _Inflight(spec, set(md.partitions))
        if md.partitions:
            self.markers.enqueue(spec, md.partitions)
        else:
            self._write_completion(md.transactional_id)

    def _on_marker_done(self, spec: MarkerSpec, tp: TopicPartition, outcome: Outcome) -> None:
        inflight = self._inflight.get(spec.transactional_id)
        if inflight is None or (inflight.spec is not spec and inflight.spec != spec):
            return  # an older incarnation's marker
        inflight.remaining.discard(tp)
        if outcome is Outcome.DROPPED:
            inflight.dropped.add(tp)
        if not inflight.remaining:
            self._write_completion(spec.transactional_id)

    def _write_completion(self, txn_id: str) -> None:
        inflight = self._inflight.get(txn_id)
        md = self._txns.get(txn_id)
        p = self.partition_for(txn_id)
        if (
            inflight is None
            or md is None
            or not self._partitions.is_loaded(p)
            or self._epochs.get(p) != inflight.spec.coordinator_epoch
            or not md.state.is_prepare
        ):
            self._inflight.pop(txn_id, None)
            self._signal_settled(txn_id)
            return
        transit = md.prepare_complete(self.clock_ms())
        if not self._commit(md, transit):
            # Keep the pending state (requests get CONCURRENT_TRANSACTIONS) and retry.
            md.pending_state = S.COMPLETE_COMMIT if inflight.spec.commit else S.COMPLETE_ABORT
            self._unwritten_completions.add(txn_id)
            return
        del self._inflight[txn_id]
        self._unwritten_completions.discard(txn_id)
        self._signal_settled(txn_id)
        if transit.last_producer_id != transit.producer_id and supports_epoch_bump(
            transit.client_transaction_version
        ):
            self.counters.producer_id_rotations += 1  # a TV2 end at the last epoch
        if md.state == S.COMPLETE_COMMIT:
            self.counters.transactions_committed += 1
        else:
            self.counters.transactions_aborted += 1
        if inflight.dropped:
            log.warning(
                "%s: completed %s with dropped markers for %s",
                txn_id,
                md.state.value,
                sorted(inflight.dropped),
            )

    def _signal_settled(self, txn_id: str) -> None:
        waiters = self._settled.pop(txn_id, None)
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def is_completing(self, transactional_id: str | None) -> bool:
        """Whether the id's transaction has markers or its completion still to write."""
        return bool(transactional_id) and (
            transactional_id in self._inflight or transactional_id in self._unwritten_completions
        )

    async def wait_if_completing(self, transactional_id: str | None) -> None:
        """Hold a request for a transaction whose markers are still being written.

        Kafka answers such requests (the next transaction's AddPartitionsToTxn, a
        retried EndTxn, InitProducerId) with CONCURRENT_TRANSACTIONS at once and the
        client retries after a backoff. Waiting here for up to
        ``concurrent_wait_ms`` (usually a millisecond or two) gives the client the
        answer it would get after its retry, without the backoff; 0 keeps Kafka's
        immediate error. Markers that cannot be delivered still end in
        CONCURRENT_TRANSACTIONS once the wait runs out. The request resumes as soon
        as the completion is written (a future per waiter, a timer for the limit).
        """
        wait_s = self.config.concurrent_wait_ms / 1000
        if wait_s <= 0 or not self.is_completing(transactional_id):
            return
        assert transactional_id is not None
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        waiters = self._settled.setdefault(transactional_id, [])
        waiters.append(waiter)
        timer = loop.call_later(wait_s, _release, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            current = self._settled.get(transactional_id)
            if current is not None and waiter in current:
                current.remove(waiter)
                if not current:
                    del self._settled[transactional_id]

    def retry_unwritten_completions(self) -> None:
        for txn_id in list(self._unwritten_completions):
            self._unwritten_completions.discard(txn_id)
            self._write_completion(txn_id)

    # ------------------------------------------------------------------ periodic steps

    def abort_timed_out_transactions(self) -> list[str]:
        """Abort (with an epoch bump) every Ongoing transaction older than its timeout.

        Transactions marked two-phase-commit (KIP-939) never time out. Returns the ids
        whose abort started. Also retries completions whose log append failed.
        """
        self.retry_unwritten_completions()
        now = self.clock_ms()
        aborted = []
        two_pc_bug = self.config.bugs.two_phase_commit_timeout
        for txn_id, md in list(self._txns.items()):
            timeout_ms = md.txn_timeout_ms
            if md.is_two_phase and two_pc_bug:  # bounded as if it were not 2PC
                timeout_ms = min(timeout_ms, self.config.max_timeout_ms)
            if (
                md.state != S.ONGOING
                or md.pending_transition_in_progress
                or (md.is_two_phase and not two_pc_bug)
                or md.txn_start_ms + timeout_ms >= now
                or self.config.bugs.transaction_timeout_never_fires
            ):
                continue
            if md.producer_epoch >= MAX_EPOCH:
                log.error("%s: cannot fence epoch MAX to time out its transaction", txn_id)
                continue
            try:
                transit = self._fence_and_abort(md, now)
            except EpochOverflow as exc:
                log.error("cannot abort the timed-out transaction: %s", exc)
                continue
            if self._begin_completion(md, transit) == NONE:
                self.counters.transactions_timed_out += 1
                aborted.append(txn_id)
                log.info(
                    "%s: transaction of producer %d timed out after %d ms; aborting",
                    txn_id,
                    md.producer_id,
                    timeout_ms,
                )
        return aborted

    def remove_expired_transactional_ids(self) -> list[str]:
        """Forget ids idle (Empty/Complete*) for ``transactional_id_expiration_ms``."""
        cutoff = self.clock_ms() - self.config.transactional_id_expiration_ms
        expired = []
        for txn_id, md in list(self._txns.items()):
            if (
                md.pending_transition_in_progress
                or not md.state.is_expiration_allowed
                or md.txn_last_update_ms > cutoff
            ):
                continue
            md.prepare_dead()  # validates the transition
            if not self._append(txn_id, [store.tombstone(txn_id)]):
                continue
            del self._txns[txn_id]
            self.counters.transactional_ids_expired += 1
            expired.append(txn_id)
            self._maybe_compact(self.partition_for(txn_id))
        if expired:
            log.info("expired %d transactional ids", len(expired))
        return expired

    # ------------------------------------------------------------------ observability

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The live metadata (read-only use: tests, state dumps)."""
        return self._txns.get(transactional_id)

    def transactional_ids(self) -> list[str]:
        return list(self._txns)

    def describe(self, transactional_id: str) -> TxnDescription:
        """DescribeTransactions for one id (KIP-664), with coordinator internals."""
        if not transactional_id:
            return TxnDescription(int(E.invalid_request), transactional_id or "")
        err = self.coordinator_error(transactional_id)
        if err:
            return TxnDescription(err, transactional_id)
        md = self._txns.get(transactional_id)
        if md is None or md.state == S.DEAD:
            return TxnDescription(int(E.transactional_id_not_found), transactional_id)
        inflight = self._inflight.get(transactional_id)
        partitions = md.partitions if inflight is None else inflight.remaining
        return TxnDescription(
            error=NONE,
            transactional_id=transactional_id,
            state=md.state.value,
            producer_id=md.producer_id,
            producer_epoch=md.producer_epoch,
            transaction_timeout_ms=md.txn_timeout_ms,
            transaction_start_time_ms=md.txn_start_ms,
            partitions=tuple(sorted(partitions)),
            last_producer_id=md.last_producer_id,
            last_producer_epoch=md.last_producer_epoch,
            last_update_time_ms=md.txn_last_update_ms,
            pending_state=None if md.pending_state is None else md.pending_state.value,
            coordinator_epoch=self._epochs.get(self.partition_for(transactional_id), -1),
            pending_markers=tuple(sorted(self.markers.pending(transactional_id))),
            client_transaction_version=md.client_transaction_version,
            two_phase_commit=md.two_phase_commit,
        )

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
    ) -> ListResult:
        """ListTransactions (KIP-664): ids in loaded partitions, filtered by state names,
        producer ids and (v1+) a minimum time since the transaction started (as Kafka: an
        id that never started one has start time -1 and is always listed)."""
        if self._partitions.any_loading:
            return ListResult(int(E.coordinator_load_in_progress))
        state_names = list(states)
        wanted_states = {s for s in (S.from_name(n) for n in state_names) if s is not None}
        unknown = tuple(n for n in state_names if S.from_name(n) is None)
        wanted_pids = set(producer_ids)
        now = self.clock_ms()
        out = []
        for txn_id, md in self._txns.items():
            if md.state == S.DEAD:
                continue
            if wanted_pids and md.producer_id not in wanted_pids:
                continue
            if state_names and md.state not in wanted_states:
                continue
            # Kafka's rule (TransactionStateManager.listTransactionStates): skip only what
            # started less than duration_ms ago, so an id with no start time (-1: never
            # started one) passes every duration filter.
            if duration_ms >= 0 and now - md.txn_start_ms < duration_ms:
                continue
            out.append(ListedTransaction(txn_id, md.producer_id, md.state.value))
        return ListResult(NONE, tuple(out), unknown)

    def active_transaction_open_time_max_ms(self) -> int:
        """How long the oldest open transaction (Ongoing, PrepareCommit, PrepareAbort) has
        been open, in ms (0 if none): KIP-939's active-transaction-open-time-max."""
        now = self.clock_ms()
        started = [
            md.txn_start_ms
            for md in self._txns.values()
            if md.state.has_open_transaction and md.txn_start_ms >= 0
        ]
        return max(0, now - min(started)) if started else 0

    def persisted_state(self, partition: int) -> dict[str, TxnTransit]:
        """What replaying the partition's log yields now (tests compare it to memory)."""
        return store.read_partition(store.log_path(self.data_dir, partition)).transactions

    def memory_state(self, partition: int) -> dict[str, TxnTransit]:
        return {
            tid: md.snapshot()
            for tid, md in self._txns.items()
            if self.partition_for(tid) == partition
        }


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _is_valid_producer_id(md: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """KIP-360: may a request naming ``expected`` (pid, epoch) continue as this id?

    Yes if the id has no epoch yet (just created: a producer recovering after its id
    expired gets the new producer id), if it names the current producer id (the epoch
    is checked when bumping), or if it names the previous producer id at an exhausted
    epoch (a retry of the bump that rotated onto the current producer id).
    """
    pid, epoch = expected
    return (
        md.producer_epoch == NO_PRODUCER_EPOCH
        or pid == md.producer_id
        or (pid == md.last_producer_id and is_epoch_exhausted(epoch))
    )


__all__ = [
    "EndResult",
    "InitResult",
    "ListResult",
    "ListedTransaction",
    "ProducerIdSource",
    "TransactionCoordinator",
    "TxnCounters",
    "TxnDescription",
    "wall_clock_ms",
]
