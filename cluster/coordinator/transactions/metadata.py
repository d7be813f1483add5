"""Per-transactional-id metadata and the state changes the coordinator may make to it.

Every change is two steps, as in Kafka: a ``prepare_*`` method computes the complete
target (:class:`TxnTransit`, checked against the transition table) without touching
the metadata; the coordinator appends the transit to the transaction log and only
then :meth:`TransactionMetadata.apply`-s it. A failed append therefore leaves memory
exactly as the log says, and replaying the log rebuilds exactly what is in memory.

KIP-890 part 2 (a client on transaction.version 2, ``client_transaction_version``):
every EndTxn bumps the epoch (PrepareX carries epoch + 1 and the markers are written
with it); an EndTxn at the last epoch (Short.MaxValue - 1) writes PrepareX at
Short.MaxValue with ``next_producer_id`` set, and CompleteX moves onto that producer id
at epoch 0. ``last_producer_id`` (Kafka's PreviousProducerId) and
``last_producer_epoch`` say what the client used, so a retried EndTxn whose response
was lost gets the same answer.

KIP-939 (2PC): ``two_phase_commit`` marks an id whose producer takes part in an external
two-phase commit (its transactions never time out; the timeout is stored as Kafka's
Int.MaxValue). A keep-prepared InitProducerId leaves the open transaction's producer id and
epoch as they are (the markers and the application's PreparedTxnState name them) and gives
the new producer instance ``next_producer_id`` / ``next_producer_epoch`` (Kafka's
NextProducerId / NextProducerEpoch): that instance may only end the transaction, and each
further keep-prepared init bumps that epoch again (onto a new producer id when exhausted).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .state import TxnState, check_transition

S = TxnState

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue
TWO_PC_TIMEOUT_MS = 2_147_483_647
"""The timeout stored for a 2PC producer (Kafka's Int.MaxValue: never times out)."""


TV2 = 2
VALUE_VERSIONS = (0, 1)
VALUE_VERSION = 1
"""Transaction-log value versions (as Kafka's TransactionLogValue): 1 is written once
transaction.version >= 1, or whenever a record carries a TV1/TV2 client's fields."""
"""The transaction.version from which every transaction end bumps the epoch."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out Short.MaxValue, so it can always fence the last epoch it gave."""
    return epoch >= MAX_EPOCH - 1


def supports_epoch_bump(transaction_version: int) -> bool:
    """KIP-890 part 2: TV2 clients get a new epoch with every EndTxn."""
    return transaction_version >= TV2


class TxnTransit(NamedTuple):
    """The complete target of one state change: persisted first, then applied.

    Immutable; a named tuple rather than a frozen dataclass because three are built
    per transaction and a frozen dataclass's ``__init__`` sets each of the 13 fields
    with ``object.__setattr__`` (change one with ``_replace``)."""

    state: TxnState
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    txn_last_update_ms: int
    client_transaction_version: int = 0
    next_producer_id: int = NO_PRODUCER_ID
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    two_phase_commit: bool = False

    def to_json(self, value_version: int = VALUE_VERSION) -> dict[str, Any]:
        """The transaction-log value. Version 1 (transaction.version >= 1, KIP-890) adds
        ``tv`` (ClientTransactionVersion) and ``next_pid`` (NextProducerId) and says
        ``"v": 1``; version 0 has neither (as every record written before KIP-890)."""
        if value_version not in VALUE_VERSIONS:
            raise ValueError(f"unknown transaction log value version {value_version}")
        value: dict[str, Any] = {"v": 1} if value_version >= 1 else {}
        value.update(
            state=self.state.value,
            pid=self.producer_id,
            last_pid=self.last_producer_id,
            epoch=self.producer_epoch,
            last_epoch=self.last_producer_epoch,
            timeout_ms=self.txn_timeout_ms,
            partitions=sorted([t, p] for t, p in self.partitions),
            start_ms=self.txn_start_ms,
            update_ms=self.txn_last_update_ms,
        )
        if value_version >= 1:
            value["tv"] = self.client_transaction_version
            value["next_pid"] = self.next_producer_id
        value["next_epoch"] = self.next_producer_epoch
        value["two_pc"] = self.two_phase_commit
        return value

    @property
    def needs_value_v1(self) -> bool:
        """Whether version 0 would lose something (a TV1/TV2 client's fields)."""
        return self.client_transaction_version != 0 or self.next_producer_id != NO_PRODUCER_ID

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TxnTransit:
        """Any value version (records without ``"v"`` are version 0: absent fields take
        their defaults)."""
        version = int(value.get("v", 0))
        if version not in VALUE_VERSIONS:
            raise ValueError(f"unknown transaction log value version {version}")
        state = TxnState.from_name(value["state"])
        if state is None:
            raise ValueError(f"unknown transaction state {value['state']!r}")
        return cls(
            state=state,
            producer_id=int(value["pid"]),
            last_producer_id=int(value.get("last_pid", NO_PRODUCER_ID)),
            producer_epoch=int(value["epoch"]),
            last_producer_epoch=int(value.get("last_epoch", NO_PRODUCER_EPOCH)),
            txn_timeout_ms=int(value["timeout_ms"]),
            partitions=frozenset((str(t), int(p)) for t, p in value.get("partitions", ())),
            txn_start_ms=int(value.get("start_ms", -1)),
            txn_last_update_ms=int(value.get("update_ms", -1)),
            client_transaction_version=int(value.get("tv", 0)),
            next_producer_id=int(value.get("next_pid", NO_PRODUCER_ID)),
            next_producer_epoch=int(value.get("next_epoch", NO_PRODUCER_EPOCH)),
            two_phase_commit=bool(value.get("two_pc", False)),
        )


class EpochError(Exception):
    """InitProducerId named a producer id/epoch that is not current (PRODUCER_FENCED)."""


class EpochOverflow(Exception):
    """A fence and abort would take the epoch past Short.MAX_VALUE (only with the bug
    switch ``txnchaos.bug.tv2.fence.epoch.overflow``, KAFKA-19367)."""


@dataclass(slots=True)
class TransactionMetadata:
    """What the coordinator knows about one transactional id."""

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    """The producer id before the last InitProducerId or TV2 transaction end (==
    producer_id after a plain epoch bump, the old id after a rotation); KIP-360's
    LastProducerId, KIP-890's PreviousProducerId."""
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch a KIP-360 bump started from (-1 after an InitProducerId from a new
    producer instance), so a retried bump gets the current epoch back."""
    txn_timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    pending_state: TxnState | None = None
    """The state this id is moving to while an asynchronous step is under way (the
    markers of a PrepareX transaction); requests that would change it meanwhile get
    CONCURRENT_TRANSACTIONS."""
    client_transaction_version: int = 0
    next_producer_id: int = NO_PRODUCER_ID
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    two_phase_commit: bool = False

    # ------------------------------------------------------------------ views

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def keeps_prepared(self) -> bool:
        """An open transaction kept by a keep-prepared InitProducerId (KIP-939): its
        client now uses ``next_producer_id`` / ``next_producer_epoch``."""
        return self.state == S.ONGOING and self.next_producer_epoch != NO_PRODUCER_EPOCH

    @property
    def client_ids(self) -> tuple[int, int]:
        """The producer id and epoch the current client instance uses."""
        if self.keeps_prepared:
            return self.next_producer_id, self.next_producer_epoch
        return self.producer_id, self.producer_epoch

    @property
    def is_two_phase(self) -> bool:
        """A KIP-939 participant: its transactions are never timed out."""
        return self.two_phase_commit or self.txn_timeout_ms == TWO_PC_TIMEOUT_MS

    def snapshot(self) -> TxnTransit:
        """The current persisted-equivalent state (what replaying the log yields)."""
        return TxnTransit(
            state=self.state,
            producer_id=self.producer_id,
            last_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms,
            partitions=frozenset(self.partitions),
            txn_start_ms=self.txn_start_ms,
            txn_last_update_ms=self.txn_last_update_ms,
            client_transaction_version=self.client_transaction_version,
            next_producer_id=self.next_producer_id,
            next_producer_epoch=self.next_producer_epoch,
            two_phase_commit=self.two_phase_commit,
        )

    @classmethod
    def restore(cls, transactional_id: str, transit: TxnTransit) -> TransactionMetadata:
        md = cls(transactional_id, transit.producer_id)
        md._set(transit)
        return md

    # ------------------------------------------------------------------ applying

    def _set(self, t: TxnTransit) -> None:
        self.state = t.state
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.partitions = set(t.partitions)
        self.txn_start_ms = t.txn_start_ms
        self.txn_last_update_ms = t.txn_last_update_ms
        self.client_transaction_version = t.client_transaction_version
        self.next_producer_id = t.next_producer_id
        self.next_producer_epoch = t.next_producer_epoch
        self.two_phase_commit = t.two_phase_commit

    def apply(self, transit: TxnTransit) -> None:
        """Make a persisted transit the current state (clears the pending state)."""
        check_transition(self.state, transit.state, self.transactional_id)
        self._set(transit)
        self.pending_state = None

    # ------------------------------------------------------------------ preparing

    def _transit(self, target: TxnState, **changes: Any) -> TxnTransit:
        check_transition(self.state, target, self.transactional_id)
        if target != S.DEAD and changes.get("producer_epoch", self.producer_epoch) < 0:
            raise ValueError(f"illegal producer epoch for {target.value}: {changes}")
        # snapshot()._replace(...), without building the transit twice or a
        # dict of its fields (this runs three times per transaction).
        pop = changes.pop
        partitions = pop("partitions", None)
        transit = TxnTransit(
            target,
            pop("producer_id", self.producer_id),
            pop("last_producer_id", self.last_producer_id),
            pop("producer_epoch", self.producer_epoch),
            pop("last_producer_epoch", self.last_producer_epoch),
            pop("txn_timeout_ms", self.txn_timeout_ms),
            frozenset(self.partitions) if partitions is None else partitions,
            pop("txn_start_ms", self.txn_start_ms),
            pop("txn_last_update_ms", self.txn_last_update_ms),
            pop("client_transaction_version", self.client_transaction_version),
            pop("next_producer_id", self.next_producer_id),
            pop("next_producer_epoch", self.next_producer_epoch),
            pop("two_phase_commit", self.two_phase_commit),
        )
        if changes:
            raise TypeError(f"unknown transit fields: {sorted(changes)}")
        return transit

    def prepare_increment_epoch(
        self,
        new_timeout_ms: int,
        expected_epoch: int | None,
        now_ms: int,
        two_phase_commit: bool = False,
    ) -> TxnTransit:
        """InitProducerId without rotation (KIP-360 rules for ``expected_epoch``).

        No expected epoch: a new producer instance; bump, forget the last epoch.
        Expected == current (or there is no current): a KIP-360 bump; remember the epoch
        it started from. Expected == last epoch: a retry of a bump already done; return
        the current epoch unchanged (never Short.MaxValue, which only a fence reaches).
        Anything else raises :class:`EpochError` -- also when the epochs are exhausted
        and the request is not one the caller rotates for (it then names an epoch that
        has been fenced).
        """
        if expected_epoch is None:
            epoch, last = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch and self.producer_epoch < MAX_EPOCH:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise EpochError(
                f"expected epoch {expected_epoch} is neither the current {self.producer_epoch}"
                f" nor the last {self.last_producer_epoch}"
            )
        if epoch > self.producer_epoch and self.is_epoch_exhausted:
            raise RuntimeError(f"no epochs left for producer id {self.producer_id}")
        return self._transit(
            S.EMPTY,
            last_producer_id=self.producer_id if self.producer_epoch >= 0 else NO_PRODUCER_ID,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=new_timeout_ms,
            partitions=frozenset(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
            next_producer_epoch=NO_PRODUCER_EPOCH,
            two_phase_commit=two_phase_commit,
        )

    def prepare_producer_id_rotation(
        self,
        new_producer_id: int,
        new_timeout_ms: int,
        now_ms: int,
        record_last_epoch: bool,
        two_phase_commit: bool = False,
    ) -> TxnTransit:
        """InitProducerId when the epoch is exhausted: a fresh producer id at epoch 0."""
        if self.state.has_open_transaction:
            raise RuntimeError("cannot rotate the producer id while a transaction is open")
        return self._transit(
            S.EMPTY,
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_timeout_ms,
            partitions=frozenset(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
            next_producer_epoch=NO_PRODUCER_EPOCH,
            two_phase_commit=two_phase_commit,
        )

    def prepare_keep_prepared(
        self,
        new_producer_id: int | None,
        new_timeout_ms: int,
        now_ms: int,
        two_phase_commit: bool,
    ) -> TxnTransit:
        """A keep-prepared InitProducerId on an open transaction (KIP-939): the
        transaction stays Ongoing with its producer id and epoch; the new instance gets
        the epoch after the last one handed out (a new producer id at epoch 0 once that
        is exhausted: ``new_producer_id``), so every earlier instance is fenced."""
        if self.state != S.ONGOING:
            raise RuntimeError(f"no open transaction to keep in state {self.state.value}")
        base_pid, base_epoch = self.client_ids
        if is_epoch_exhausted(base_epoch):
            if new_producer_id is None:
                raise RuntimeError(f"producer id {base_pid} needs a next producer id")
            next_pid, next_epoch = new_producer_id, 0
        else:
            next_pid, next_epoch = base_pid, base_epoch + 1
        return self._transit(
            S.ONGOING,
            txn_timeout_ms=new_timeout_ms,
            txn_last_update_ms=now_ms,
            next_producer_id=next_pid,
            next_producer_epoch=next_epoch,
            two_phase_commit=two_phase_commit,
        )

    def prepare_add_partitions(
        self,
        added: Iterable[TopicPartition],
        now_ms: int,
        client_transaction_version: int | None = None,
    ) -> TxnTransit:
        """AddPartitionsToTxn (or the broker's implicit add for a TV2 client, which
        records the client's transaction version; None keeps the recorded one)."""
        start = now_ms if self.state.can_start_transaction else self.txn_start_ms
        if client_transaction_version is None:
            client_transaction_version = self.client_transaction_version
        return self._transit(
            S.ONGOING,
            partitions=frozenset(self.partitions) | frozenset(added),
            txn_start_ms=start,
            txn_last_update_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_end(
        self,
        commit: bool,
        now_ms: int,
        client_transaction_version: int = 0,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransit:
        """EndTxn from the client: Ongoing -> PrepareCommit/PrepareAbort.

        TV0/TV1: the same epoch. TV2: epoch + 1, the epoch the client used kept as the
        last epoch, the producer id as the previous one; ``next_producer_id`` (given
        when the epoch is exhausted) is where CompleteX moves the id. A TV2 abort may
        also start from Empty/Complete* (nothing was added): its start time is now.
        """
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if self.keeps_prepared:
            return self._prepare_end_kept(
                target, now_ms, client_transaction_version, next_producer_id
            )
        if not supports_epoch_bump(client_transaction_version):
            return self._transit(
                target,
                txn_last_update_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        epoch = self.producer_epoch + 1
        if self.producer_epoch >= MAX_EPOCH:
            if commit:
                raise RuntimeError(f"cannot commit producer id {self.producer_id} at epoch MAX")
            epoch = MAX_EPOCH  # an abort at MAX goes through without a bump (Kafka)
        if is_epoch_exhausted(self.producer_epoch) and next_producer_id == NO_PRODUCER_ID:
            raise RuntimeError(f"producer id {self.producer_id} needs a next producer id")
        nothing_added = self.state != S.ONGOING
        return self._transit(
            target,
            last_producer_id=self.producer_id,
            producer_epoch=epoch,
            last_producer_epoch=self.producer_epoch,
            txn_start_ms=now_ms if nothing_added else self.txn_start_ms,
            txn_last_update_ms=now_ms,
            client_transaction_version=client_transaction_version,
            next_producer_id=next_producer_id,
        )

    def _prepare_end_kept(
        self, target: TxnState, now_ms: int, tv: int, rotate_to: int
    ) -> TxnTransit:
        """EndTxn from the instance that kept the transaction open (KIP-939).

        The markers carry the open transaction's producer id; their epoch fences every
        earlier instance. On the same producer id the end is the ordinary one from the
        client's epoch. On another producer id (a keep-prepared init exhausted the
        epochs) the markers carry the transaction's epoch + 1 and CompleteX moves onto the
        client's producer id (at its epoch + 1 under TV2, or ``rotate_to`` at 0)."""
        client_pid, client_epoch = self.client_ids
        bump = supports_epoch_bump(tv)
        if bump and is_epoch_exhausted(client_epoch) and rotate_to == NO_PRODUCER_ID:
            raise RuntimeError(f"producer id {client_pid} needs a next producer id")
        if client_pid == self.producer_id:
            if not bump:
                return self._transit(
                    target,
                    producer_epoch=client_epoch,
                    txn_last_update_ms=now_ms,
                    client_transaction_version=tv,
                    next_producer_id=NO_PRODUCER_ID,
                    next_producer_epoch=NO_PRODUCER_EPOCH,
                )
            return self._transit(
                target,
                last_producer_id=self.producer_id,
                producer_epoch=client_epoch + 1,
                last_producer_epoch=client_epoch,
                txn_last_update_ms=now_ms,
                client_transaction_version=tv,
                next_producer_id=rotate_to,
                next_producer_epoch=NO_PRODUCER_EPOCH,
            )
        if not bump:
            after_pid, after_epoch = client_pid, client_epoch
        elif rotate_to != NO_PRODUCER_ID:
            after_pid, after_epoch = rotate_to, 0
        else:
            after_pid, after_epoch = client_pid, client_epoch + 1
        return self._transit(
            target,
            last_producer_id=client_pid,
            producer_epoch=self.producer_epoch + 1 if bump else self.producer_epoch,
            last_producer_epoch=client_epoch,
            txn_last_update_ms=now_ms,
            client_transaction_version=tv,
            next_producer_id=after_pid,
            next_producer_epoch=after_epoch,
        )

    def prepare_fence_and_abort(
        self, now_ms: int, transaction_version: int = 0, *, overflow_bug: bool = False
    ) -> TxnTransit:
        """Abort the open transaction with a bumped epoch, fencing its producer.

        Ongoing -> PrepareEpochFence -> PrepareAbort in one step (PrepareEpochFence is
        never persisted). The bumped epoch is never returned to a client: whoever asked
        (InitProducerId) retries and bumps again, possibly onto a new producer id.

        Under TV2 the fence is the abort's own bump (Kafka 4.x: PrepareEpochFence leaves
        the epoch to the TV2 end, which bumps once): the markers carry epoch + 1 and the
        fenced epoch is kept as the last epoch, so the fenced producer's
        InitProducerId(id, epoch) is a recovery answered with epoch + 1 (KIP-360) and
        its EndTxn(abort) at that epoch reads as a retry of this abort. ``overflow_bug``
        (``txnchaos.bug.tv2.fence.epoch.overflow``, KAFKA-19367): Apache Kafka 4.0.0 bumped
        for the fence and again for the TV2 abort, and at the last usable epoch the second
        bump went past MAX and was refused (IllegalArgumentException("Illegal new producer
        epoch"), here :class:`EpochOverflow`) with the fenced epoch left in place: every
        later fence is refused too.
        """
        check_transition(self.state, S.PREPARE_EPOCH_FENCE, self.transactional_id)
        check_transition(S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT, self.transactional_id)
        if self.producer_epoch >= MAX_EPOCH:
            if overflow_bug:  # what the half-done fence below left: refused for good
                raise EpochOverflow(f"{self.transactional_id}: cannot fence at epoch MAX")
            raise RuntimeError(f"cannot fence producer id {self.producer_id} at epoch MAX")
        base = self.producer_epoch
        client_pid, client_epoch = self.client_ids
        if client_pid == self.producer_id:
            base = max(base, client_epoch)  # fence a keep-prepared instance as well
        fenced = min(base + 1, MAX_EPOCH)
        if overflow_bug and supports_epoch_bump(transaction_version) and fenced + 1 > MAX_EPOCH:
            # Kafka 4.0.0 had already set the fenced epoch when the second bump threw: the
            # producer's own EndTxn is then fenced, and no later fence gets past MAX
            self.producer_epoch = fenced
            raise EpochOverflow(
                f"{self.transactional_id}: illegal new producer epoch {fenced + 1 - 65536} "
                f"(fenced at {fenced}, then bumped again by the TV2 abort)"
            )
        if not supports_epoch_bump(transaction_version):
            return self.snapshot()._replace(
                state=S.PREPARE_ABORT,
                producer_epoch=fenced,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                txn_last_update_ms=now_ms,
                client_transaction_version=transaction_version,
                next_producer_id=NO_PRODUCER_ID,
                next_producer_epoch=NO_PRODUCER_EPOCH,
            )
        return self.snapshot()._replace(
            state=S.PREPARE_ABORT,
            last_producer_id=self.producer_id,
            producer_epoch=fenced,
            last_producer_epoch=base,
            txn_last_update_ms=now_ms,
            client_transaction_version=transaction_version,
            next_producer_id=NO_PRODUCER_ID,
            next_producer_epoch=NO_PRODUCER_EPOCH,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """All markers are written: PrepareX -> CompleteX, partitions cleared.

        TV2: a transaction that exhausted the epoch moves onto ``next_producer_id`` at
        epoch 0 (the previous producer id and the last epoch stay what the client
        used, as PrepareX recorded them, so its retry is recognised: for a transaction
        kept by a keep-prepared init that is the instance's producer id, not the
        transaction's; KIP-939's walk-through: "CompleteCommit, ProducerId=85,
        PrevProducerId=73")."""
        if self.state == S.PREPARE_COMMIT:
            target = S.COMPLETE_COMMIT
        elif self.state == S.PREPARE_ABORT:
            target = S.COMPLETE_ABORT
        else:
            raise RuntimeError(f"cannot complete a transaction in state {self.state.value}")
        if self.next_producer_id != NO_PRODUCER_ID:
            return self._transit(
                target,
                producer_id=self.next_producer_id,
                last_producer_id=self.last_producer_id,
                producer_epoch=max(self.next_producer_epoch, 0),
                partitions=frozenset(),
                txn_last_update_ms=now_ms,
                next_producer_id=NO_PRODUCER_ID,
                next_producer_epoch=NO_PRODUCER_EPOCH,
            )
        if not supports_epoch_bump(self.client_transaction_version):
            return self._transit(target, partitions=frozenset(), txn_last_update_ms=now_ms)
        return self._transit(
            target,
            last_producer_id=self.producer_id,
            partitions=frozenset(),
            txn_last_update_ms=now_ms,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._transit(S.DEAD, partitions=frozenset())


__all__ = [
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TV2",
    "TWO_PC_TIMEOUT_MS",
    "VALUE_VERSION",
    "VALUE_VERSIONS",
    "EpochError",
    "TopicPartition",
    "TransactionMetadata",
    "TxnTransit",
    "is_epoch_exhausted",
    "supports_epoch_bump",
]
