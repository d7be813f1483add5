"""Our asyncio Kafka producer: idempotent, or transactional under transaction.version 0/1/2.

::

    p = Producer(ProducerConfig(bootstrap, transactional_id="t-1"))
    await p.init_transactions(30)
    await p.begin_transaction()               # picks the protocol (TV0/1 or TV2) for this txn
    fut = p.send("events", 0, b"v", key=b"k") # a future of RecordMetadata
    await p.send_offsets_to_transaction([("in", 0, 42)], GroupMetadata("g"), 30)
    await p.commit_transaction(30)            # or abort_transaction
    await p.close()

The protocol is chosen at each ``begin_transaction`` from the latest finalized
``transaction.version`` the producer saw (ApiVersions v3), or forced by
``ProducerConfig.transaction_version``. TV2 (KIP-890 part 2) needs Produce v12 and EndTxn v5
from the cluster; a cluster that does not serve them gets the old protocol (TV0/1:
AddPartitionsToTxn before the first write to a partition, AddOffsetsToTxn before
TxnOffsetCommit, EndTxn <= v4). Under TV2 each EndTxn returns a bumped epoch, which the next
transaction uses; under TV0/1 an abort after an abortable error bumps the epoch with
InitProducerId(current id and epoch) (KIP-360).

Errors are :class:`~.errors.RetriableError` (a timeout: call again to continue),
:class:`~.errors.AbortableError` (abort the transaction) or :class:`~.errors.FatalError`
(fenced or unusable: close it). ``hold_produce``, ``hold_end_txn``, ``reuse_stale_epoch`` and
``ProducerConfig.misbehavior`` make it misbehave on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from .batch import Record, encode_batch
from .config import Misbehavior, ProducerConfig
from .connection import API_END_TXN, API_PRODUCE, AuthenticationError, NodeConnection
from .errors import (
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    UNKNOWN_PRODUCER_ID,
    AbortableError,
    FatalError,
    KafkaClientError,
    RetriableError,
    StateError,
    UnsupportedError,
)
from .group import GroupMetadata
from .metadata import KEY_TRANSACTION, ClusterView
from .producer_state import ProducerIdAndEpoch, ProducerState
from .sender import Batch, RecordMetadata, Sender
from .two_phase import PreparedTxnState
from .txn_manager import InitAnswer, TxnRequests
from .txn_state import TxnState, TxnStateMachine

T = TypeVar("T")

#: How many of ``reinitializations``' InitProducerId calls are in flight at once on the
#: coordinator's connection. Apache Kafka reads a connection's next request only once it
#: has answered the one before (it mutes the channel), and so does our cluster, so they are
#: applied one by one in order; pipelined, the coordinator applies them back to back instead
#: of waiting a client round trip for each. Measured on Apache Kafka 4.0.0 through the
#: fault proxy, 2,000-4,000 calls at load 25-29 on 2 cores: one at a time 9-16 ms a call
#: (every call wakes the client, the proxy and two broker threads, each waiting its turn on
#: a loaded CPU), 16 in flight 2.7 ms, 64: 1.4 ms, 256: 0.57 ms, 1,024: 0.57 ms.
REINITIALIZATIONS_IN_FLIGHT = 256
#: The last epoch a coordinator bumps to; InitProducerId at it gives a new producer id
#: (Kafka's ``isProducerEpochExhausted``: Short.MAX_VALUE - 1).
LAST_EPOCH = 32_766


@dataclass
class HeldRequest:
    """A request built now, with the producer's state of now, and sent only by ``send()``
    (any number of times, at any later point): a request delayed in the network."""

    name: str
    entity: Any
    target: Callable[[], Awaitable[NodeConnection]]
    timeout_s: float

    async def send(self) -> Any:
        """Send it to where it goes now (the partition's leader, the coordinator) and return
        the response entity."""
        conn = await self.target()
        return await conn.send_entity(self.entity, self.timeout_s)


class Producer:
    def __init__(self, config: ProducerConfig) -> None:
        self.config = config
        self.view = ClusterView(
            config.bootstrap,
            config.client_id,
            request_timeout_s=config.request_timeout_ms / 1000,
            max_age_s=config.metadata_max_age_ms / 1000,
            sasl=config.sasl(),
        )
        self.state = ProducerState()
        self.sm = TxnStateMachine()
        self.txn = TxnRequests(self.view, self.state, config)
        self.sender = Sender(
            self.view,
            self.state,
            self.sm,
            config,
            self._add_partitions_now,
            new_producer_id=self._new_idempotent_producer_id,
        )
        self.transactional = config.transactional_id is not None
        #: KIP-939: the transaction the coordinator kept at a keep-prepared init, and the
        #: one prepared now (what ``complete_transaction`` compares with).
        self._ongoing = PreparedTxnState()
        self._prepared = PreparedTxnState()

    # -- what the producer is -----------------------------------------------------------------

    @property
    def ids(self) -> ProducerIdAndEpoch:
        return self.state.current

    @property
    def transaction_version(self) -> int:
        """The protocol of the open (or last) transaction: 0, 1 or 2."""
        return self.sm.book.tv

    @property
    def cluster_transaction_version(self) -> int:
        """The finalized transaction.version the cluster reported last (0 if none)."""
        return self.view.features.transaction_version()

    # -- helpers ------------------------------------------------------------------------------

    async def _within(self, aw: Awaitable[T], deadline: float, what: str) -> T:
        remaining = deadline - time.monotonic()
        try:
            return await asyncio.wait_for(aw, max(remaining, 0.001))
        except TimeoutError:
            raise RetriableError(f"{what} did not complete in time") from None

    async def _guard(self, aw: Awaitable[T]) -> T:
        """Run a coordinator call; a fatal error makes the producer unusable, an abortable
        one dooms the open transaction."""
        try:
            return await aw
        except FatalError as exc:
            self.sm.fail(exc)
            raise
        except AbortableError as exc:
            self.sm.abortable(exc, bump=exc.code in (UNKNOWN_PRODUCER_ID,))
            raise

    async def _add_partitions_now(self, partitions: set[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for partitions written to (TV0/1), from the sender."""
        book = self.sm.book
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        try:
            await self._guard(self.txn.add_partitions(partitions, deadline))
        except (AbortableError, FatalError):
            return  # the sender fails the waiting records
        except RetriableError as exc:
            self.sm.abortable(AbortableError(str(exc), exc.code), bump=True)
            return
        if book is self.sm.book:
            book.added |= partitions
            book.pending -= partitions
            book.started = True

    async def _new_idempotent_producer_id(self) -> None:
        """An idempotent producer whose epoch is exhausted takes a new producer id
        (InitProducerId without a transactional id; sequences restart at 0)."""
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        answer = await self.txn.init_producer_id(deadline, bump=False)
        self.state.set_id(answer.producer_id, answer.epoch)

    # -- lifecycle ----------------------------------------------------------------------------

    async def init_transactions(
        self, timeout_s: float = 60.0, *, keep_prepared_txn: bool = False
    ) -> None:
        """InitProducerId (fences older instances with this transactional id); for an
        idempotent producer, just its producer id. Retriable on timeout.

        ``keep_prepared_txn`` (KIP-939): the coordinator keeps the transaction an earlier
        instance left open (``ongoing_prepared_state`` names it, empty if there was none)
        and this producer may only finish it: ``commit_transaction``,
        ``abort_transaction`` or ``complete_transaction``."""
        deadline = time.monotonic() + timeout_s
        if keep_prepared_txn:
            self._need_transactional()
        self.sm.transition(TxnState.INITIALIZING)
        try:
            await self._within(self.view.refresh(), deadline, "metadata")
        except AuthenticationError as exc:
            self.sm.fail(exc)
            raise
        except KafkaClientError as exc:
            raise RetriableError(f"cluster not reachable: {exc}") from exc
        answer = await self._guard(
            self.txn.init_producer_id(deadline, bump=False, keep_prepared_txn=keep_prepared_txn)
        )
        self.state.set_id(answer.producer_id, answer.epoch)
        if self.config.reinitializations:
            answer = await self._reinitialize(self.config.reinitializations, timeout_s)
        ongoing = PreparedTxnState()
        if answer.ongoing_producer_id >= 0 and answer.ongoing_epoch >= 0:
            ongoing = PreparedTxnState(answer.ongoing_producer_id, answer.ongoing_epoch)
        self._ongoing = ongoing
        if keep_prepared_txn:
            tv = await self._choose_tv()
            self.sm.recovered_transaction(tv, open_on_coordinator=not ongoing.is_empty)
            self._prepared = ongoing
        else:
            self.sm.transition(TxnState.READY)
        self.sender.start()

    async def _reinitialize(self, count: int, timeout_s: float) -> InitAnswer:
        """``count`` more InitProducerId calls, each bumping the epoch by one, pipelined
        (``REINITIALIZATIONS_IN_FLIGHT`` at a time on the coordinator's connection). Each
        names the id and epoch the calls before it leave (KIP-360's form): a retried call
        whose first attempt went through returns the same epoch instead of bumping twice,
        and a call behind one that failed is refused (fenced) rather than applied out of
        order; what a window applied in order counts, and the rest is sent again. After a window
        whose first call fails, one call in a new instance's form learns the epoch the
        coordinator reached (the failed calls may have been applied after all); that call's
        error is the producer's (each call has its own timeout)."""
        answer = InitAnswer(self.state.current.producer_id, self.state.current.epoch)
        left = count
        while left:
            start = self.state.current
            # an expected epoch past the last usable one cannot be encoded (int16): the
            # window stops at the call the coordinator answers with a new producer id
            width = min(REINITIALIZATIONS_IN_FLIGHT, left, max(1, LAST_EPOCH + 1 - start.epoch))
            deadline = time.monotonic() + timeout_s
            results = await asyncio.gather(
                *(
                    self.txn.init_producer_id(
                        deadline, bump=True, expected=(start.producer_id, start.epoch + k)
                    )
                    for k in range(width)
                ),
                return_exceptions=True,
            )
            applied = 0
            for k, result in enumerate(results):
                if isinstance(result, BaseException):
                    break
                answer = result
                applied += 1
                self.state.set_id(result.producer_id, result.epoch)
                if (result.producer_id, result.epoch) != (start.producer_id, start.epoch + k + 1):
                    break  # a new producer id (the epoch ran out): the rest named the old one
            if not applied:
                # The whole window failed, typically a stall past the timeout. The coordinator
                # may still have applied any number of its calls, so the epoch is no longer
                # known here and a call naming one would be fenced (fatal). One call in a new
                # instance's form (no producer id, as a restart sends) bumps whatever epoch the
                # coordinator holds and answers with it.
                again = time.monotonic() + timeout_s
                answer = await self._guard(self.txn.init_producer_id(again, bump=False))
                self.state.set_id(answer.producer_id, answer.epoch)
                same_id = answer.producer_id == start.producer_id
                applied = max(1, answer.epoch - start.epoch) if same_id else 1
            left -= min(applied, left)
        return answer

    @property
    def ongoing_prepared_state(self) -> PreparedTxnState:
        """The transaction the coordinator kept open at the last keep-prepared
        ``init_transactions`` (InitProducerId's OngoingTxnProducerId/Epoch); empty if none."""
        return self._ongoing

    async def prepare_transaction(self, timeout_s: float = 60.0) -> PreparedTxnState:
        """KIP-939 phase one: flush every record of the open transaction; from now on only
        ``commit_transaction``, ``abort_transaction`` or ``complete_transaction`` are
        allowed. Returns the state naming this transaction (store ``str()`` of it)."""
        self._need_transactional()
        if not self.config.enable_two_phase_commit:
            raise StateError(
                "prepare_transaction needs enable_two_phase_commit=True", INVALID_TXN_STATE
            )
        self.sm.require(TxnState.IN_TRANSACTION)
        self._require_tv2_for_two_phase("prepare_transaction")
        deadline = time.monotonic() + timeout_s
        await self._within(self.sender.flush(), deadline, "flush before prepare")
        book = self.sm.book
        if book.tv < 2 and book.pending and self.sender.misbehavior.add_partitions == "after":
            await self._add_partitions_now(set(book.pending))
        self.sm.require(TxnState.IN_TRANSACTION)  # raises the abortable error of a failed write
        self.sm.transition(TxnState.PREPARED)
        ids = self.state.current
        self._prepared = (
            PreparedTxnState(ids.producer_id, ids.epoch) if book.started else PreparedTxnState()
        )
        return self._prepared

    async def complete_transaction(self, state: PreparedTxnState, timeout_s: float = 60.0) -> bool:
        """KIP-939 recovery: commit the prepared transaction if ``state`` names it, else
        abort it. Returns True if it committed. Only after ``prepare_transaction`` or a
        keep-prepared ``init_transactions`` (nothing to do if that found no transaction)."""
        self._need_transactional()
        if self.sm.state is not TxnState.PREPARED:
            if self.sm.state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
                self.sm.require(TxnState.PREPARED)  # raises the fatal/abortable error
            raise StateError(  # KIP-939: completeTransaction of nothing prepared
                f"complete_transaction needs a prepared transaction; the producer is "
                f"{self.sm.state.value}",
                INVALID_TXN_STATE,
            )
        if not self._prepared.is_empty:
            self._require_tv2_for_two_phase("complete_transaction")
        commit = not self._prepared.is_empty and state == self._prepared
        if commit:
            await self.commit_transaction(timeout_s)
        else:
            await self.abort_transaction(timeout_s)
        return commit

    def _require_tv2_for_two_phase(self, what: str) -> None:
        """KIP-939's prepared state {producer id, epoch} names one transaction only when
        every transaction ends with an epoch bump (TV2): under TV0/1 the next transaction of
        the same instance has the same id and epoch, so a recovery could commit a
        transaction the database rolled back. Refused, with nothing changed (the
        transaction can still be committed or aborted)."""
        if self.sm.book.tv < 2:
            raise UnsupportedError(
                f"{what} needs transaction.version 2 (an epoch per transaction); this "
                f"transaction runs at transaction.version {self.sm.book.tv}: commit or "
                "abort it instead"
            )

    async def begin_transaction(self) -> None:
        self._need_transactional()
        self.sm.require(TxnState.READY)
        if self.view.stale():
            with contextlib.suppress(KafkaClientError):  # else the features seen last apply
                await self.view.refresh()
        tv = await self._choose_tv()
        self.sm.new_transaction(tv)

    async def _choose_tv(self) -> int:
        forced = self.config.transaction_version
        finalized = self.view.features.transaction_version()
        want = finalized if forced is None else forced
        if want < 2:
            return want
        if await self._tv2_served():
            return 2
        if forced is not None:
            raise UnsupportedError("transaction.version 2 forced; the cluster does not serve it")
        return 1

    async def _tv2_served(self) -> bool:
        try:
            coordinator = await self.txn.coordinator()
            any_node = await self.view.any_connection()
        except KafkaClientError:
            return False
        end_txn = coordinator.versions.get(API_END_TXN, (0, 0))[1]
        if API_PRODUCE not in any_node.versions:
            # a transaction coordinator of its own serves no Produce: when the view knows only
            # that node (a new producer's keep-prepared init, before any metadata), ask the
            # brokers; reading its missing Produce as v0 ran a TV2 cluster's transaction at
            # TV1 (and a recovered KIP-939 transaction could then not be completed)
            try:
                await self.view.refresh()
                any_node = await self.view.any_connection()
            except KafkaClientError:
                return False
        produce = any_node.versions.get(API_PRODUCE, (0, 0))[1]
        return end_txn >= 5 and produce >= 12

    def _refuse_if_prepared(self, what: str) -> None:
        if self.sm.state is TxnState.PREPARED:
            raise StateError(
                f"{what} is not allowed: the transaction is prepared (KIP-939); only "
                "commit_transaction, abort_transaction or complete_transaction may follow",
                INVALID_TXN_STATE,
            )

    def _need_transactional(self) -> None:
        if not self.transactional:
            raise StateError("not a transactional producer (no transactional_id)")

    # -- records ------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        partition: int,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the future resolves when it is acknowledged (or fails)."""
        if self.transactional:
            self._refuse_if_prepared("send")
            self.sm.require(TxnState.IN_TRANSACTION)
            book = self.sm.book
            tp = (topic, partition)
            if book.tv < 2 and tp not in book.added:
                book.pending.add(tp)
        else:
            self.sm.require(TxnState.READY)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        return self.sender.append(topic, partition, Record(key, value, tuple(headers), ts))

    async def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every record sent so far has its answer."""
        await self._within(self.sender.flush(), time.monotonic() + timeout_s, "flush")

    # -- transactions -------------------------------------------------------------------------

    async def send_offsets_to_transaction(
        self, offsets: list[tuple[str, int, int]], group: GroupMetadata, timeout_s: float = 30.0
    ) -> None:
        """Commit consumer offsets with the transaction (TV0/1: AddOffsetsToTxn first; TV2:
        TxnOffsetCommit v5 adds the offsets partition itself)."""
        self._need_transactional()
        self._refuse_if_prepared("send_offsets_to_transaction")
        self.sm.require(TxnState.IN_TRANSACTION)
        deadline = time.monotonic() + timeout_s
        book = self.sm.book
        if book.tv < 2:
            await self._guard(self.txn.add_offsets(group.group_id, deadline))
            book.started = True
        book.started = True
        await self._guard(self.txn.txn_offset_commit(group, offsets, book.tv, deadline))

    async def commit_transaction(self, timeout_s: float = 60.0) -> None:
        """Flush, then EndTxn(commit). AbortableError: it did not commit, abort it.
        RetriableError: not finished in time, call again (the state stays committing)."""
        self._need_transactional()
        deadline = time.monotonic() + timeout_s
        self.sm.require(TxnState.IN_TRANSACTION, TxnState.PREPARED, TxnState.COMMITTING)
        self.sm.transition(TxnState.COMMITTING)
        await self._within(self.sender.flush(), deadline, "flush before commit")
        book = self.sm.book
        mode = self.sender.misbehavior.add_partitions
        if book.tv < 2 and book.pending and mode == "after":
            await self._add_partitions_now(set(book.pending))
        self.sm.require(TxnState.COMMITTING)  # raises the abortable error of a failed write
        if book.started:
            ids = await self._guard(self.txn.end_txn(True, book.tv, deadline))
            if ids is not None:
                self.state.set_id(*ids)
        self.sm.transition(TxnState.READY)

    async def abort_transaction(self, timeout_s: float = 60.0) -> None:
        """Drop unsent records, wait for those in flight, EndTxn(abort); then, under TV0/1
        after an abortable error, bump the epoch (KIP-360)."""
        self._need_transactional()
        deadline = time.monotonic() + timeout_s
        self.sm.require(
            TxnState.IN_TRANSACTION,
            TxnState.PREPARED,
            TxnState.ABORTABLE_ERROR,
            TxnState.ABORTING,
        )
        self.sm.transition(TxnState.ABORTING)
        book = self.sm.book
        self.sender.fail_unsent(book.error or AbortableError("the transaction was aborted"))
        await self._within(self.sender.idle.wait(), deadline, "in-flight records before abort")
        # KIP-360: a coordinator that no longer maps the transactional id to this producer
        # id (INVALID_PRODUCER_ID_MAPPING, e.g. the id expired) cannot end the transaction;
        # InitProducerId with the current id and epoch gets a producer id it maps again.
        # Under TV2 too (each EndTxn v5 would answer the same: the producer stayed aborting).
        mapping_lost = book.error is not None and book.error.code == INVALID_PRODUCER_ID_MAPPING
        if book.started and not mapping_lost:
            try:
                ids = await self._guard(self.txn.end_txn(False, book.tv, deadline))
            except AbortableError as exc:
                if exc.code != INVALID_PRODUCER_ID_MAPPING:
                    raise
                mapping_lost = True
            else:
                if ids is not None:
                    self.state.set_id(*ids)
        bump = mapping_lost or (book.tv < 2 and book.bump_required)
        if bump and not self.sender.misbehavior.skip_epoch_bump:
            await self._bump_epoch(deadline)
        self.sm.transition(TxnState.READY)

    async def _bump_epoch(self, deadline: float) -> None:
        if not await self.txn.can_bump():
            self.state.reset_sequences()  # KIP-360 with an old coordinator: no bump
            return
        self.sm.state = TxnState.INITIALIZING
        try:
            answer = await self._guard(self.txn.init_producer_id(deadline, bump=True))
        except RetriableError:
            self.sm.state = TxnState.ABORTING  # abort_transaction() again continues it
            raise
        self.state.set_id(answer.producer_id, answer.epoch)

    async def close(self, timeout_s: float = 10.0, *, abort_open: bool = False) -> None:
        """Stop: an open transaction is aborted only with ``abort_open`` (else it stays open,
        to be aborted by the coordinator's timeout or fenced by a successor)."""
        if self.sm.state is TxnState.CLOSED:
            return
        try:
            if abort_open and self.transactional and self.sm.in_transaction:
                await self.abort_transaction(timeout_s)
            elif self.sm.state is TxnState.READY or self.sm.in_transaction:
                await self.flush(timeout_s)
        except KafkaClientError:
            pass
        finally:
            await self.sender.stop()
            await self.view.close()
            self.sm.transition(TxnState.CLOSED)

    # -- misbehaving on purpose ---------------------------------------------------------------

    @property
    def misbehavior(self) -> Misbehavior:
        return self.sender.misbehavior

    @misbehavior.setter
    def misbehavior(self, value: Misbehavior) -> None:
        """Change how the producer misbehaves from the next transaction on."""
        self.sender.misbehavior = value

    async def hold_produce(
        self,
        topic: str,
        partition: int,
        values: list[tuple[bytes | None, bytes | None]],
        *,
        advance_sequence: bool = True,
    ) -> HeldRequest:
        """A Produce of ``values`` (key, value pairs) for the open transaction (or the
        idempotent producer), with the current producer id, epoch and the partition's next
        sequence, built now and sent only by ``HeldRequest.send()``. The partition is added
        to the transaction as a send would add it (TV0/1, ``add_partitions`` ``before``).
        ``advance_sequence`` False reuses the sequence the next batch will get."""
        tp = (topic, partition)
        if self.transactional:
            self.sm.require(TxnState.IN_TRANSACTION)
            book = self.sm.book
            if book.tv < 2 and tp not in book.added:
                if self.sender.misbehavior.add_partitions == "before":
                    await self._add_partitions_now({tp})
                    self.sm.require(TxnState.IN_TRANSACTION)
                else:
                    book.pending.add(tp)
            book.started = True
            book.written.add(tp)
        tv = self.sm.book.tv if self.transactional else 0
        conn = await self.view.leader(topic, partition)
        await conn.negotiate(self.config.request_timeout_ms / 1000)
        ids = self.state.current
        if advance_sequence:
            base = self.state.take_sequence(topic, partition, len(values))
        else:
            base = self.state.next_sequence(topic, partition)
        now = int(time.time() * 1000)
        records = [Record(k, v, (), now) for k, v in values]
        payload = encode_batch(
            records,
            producer_id=ids.producer_id,
            producer_epoch=ids.epoch,
            base_sequence=base,
            transactional=self.transactional,
        )
        batch = Batch(topic, partition, [], ids, base, payload, time.monotonic())
        entity = self.sender.produce_request(conn, [batch], tv)

        async def leader() -> NodeConnection:
            self.view.forget_leader(topic, partition)
            return await self.view.leader(topic, partition)

        return HeldRequest(
            f"Produce {topic}/{partition} pid={ids.producer_id} epoch={ids.epoch} seq={base}",
            entity,
            leader,
            self.config.request_timeout_ms / 1000,
        )

    async def hold_end_txn(self, commit: bool) -> HeldRequest:
        """The EndTxn this producer would send now for the open transaction, sent only by
        ``HeldRequest.send()``. The producer's state does not change."""
        self._need_transactional()
        self.sm.require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR)
        conn = await self.txn.coordinator()
        entity = self.txn.end_txn_request(conn, commit, self.sm.book.tv)
        txn_id = self.config.transactional_id
        assert txn_id is not None

        async def coordinator() -> NodeConnection:
            self.view.forget_coordinator(KEY_TRANSACTION, txn_id)
            return await self.txn.coordinator()

        ids = self.state.current
        return HeldRequest(
            f"EndTxn({'commit' if commit else 'abort'}) pid={ids.producer_id} epoch={ids.epoch}",
            entity,
            coordinator,
            self.config.request_timeout_ms / 1000,
        )

    def reuse_stale_epoch(self, steps_back: int = 1) -> ProducerIdAndEpoch:
        """Go back to the producer id and epoch used ``steps_back`` changes ago (as a client
        that missed an epoch bump would); later requests carry it. Returns it."""
        if steps_back < 1 or steps_back > len(self.state.previous):
            raise StateError(f"no producer id/epoch {steps_back} change(s) back")
        stale = self.state.previous[-steps_back]
        self.state.set_id(stale.producer_id, stale.epoch)
        return stale
