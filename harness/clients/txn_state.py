"""The transaction state machine of our producer (the states of Kafka's Java client).

::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING -> READY
                                        ^           |    \\
                                        |           v     -> ABORTABLE_ERROR
                                        +------ ABORTING <-------+
    any -> FATAL_ERROR;  any -> CLOSED

PREPARED (KIP-939): after ``prepare_transaction`` (from IN_TRANSACTION) or a keep-prepared
``init_transactions`` (from INITIALIZING); only COMMITTING or ABORTING may follow.

ABORTING may go back to INITIALIZING (the KIP-360 epoch bump after an abortable error under
transaction.version 0/1). A bad transition is a :class:`StateError`. The per-transaction
bookkeeping (partitions added, whether anything was sent, whether the epoch must be bumped)
lives in :class:`TxnBook`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .errors import KafkaClientError, StateError


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    PREPARED = "prepared"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"
    CLOSED = "closed"


_ALLOWED: dict[TxnState, frozenset[TxnState]] = {
    TxnState.INITIALIZING: frozenset(
        {TxnState.UNINITIALIZED, TxnState.INITIALIZING, TxnState.ABORTING}
    ),
    TxnState.READY: frozenset(
        {TxnState.INITIALIZING, TxnState.COMMITTING, TxnState.ABORTING, TxnState.READY}
    ),
    TxnState.IN_TRANSACTION: frozenset({TxnState.READY}),
    TxnState.PREPARED: frozenset({TxnState.IN_TRANSACTION, TxnState.INITIALIZING}),
    TxnState.COMMITTING: frozenset(
        {TxnState.IN_TRANSACTION, TxnState.PREPARED, TxnState.COMMITTING}
    ),
    TxnState.ABORTING: frozenset(
        {TxnState.IN_TRANSACTION, TxnState.PREPARED, TxnState.ABORTABLE_ERROR, TxnState.ABORTING}
    ),
    TxnState.ABORTABLE_ERROR: frozenset(
        {TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.ABORTABLE_ERROR}
    ),
    TxnState.FATAL_ERROR: frozenset(TxnState),
    TxnState.CLOSED: frozenset(TxnState),
}


@dataclass
class TxnBook:
    """What the producer tracks for the open transaction."""

    #: transaction.version this transaction runs under (0/1: explicit adds; 2: implicit).
    tv: int = 0
    #: Partitions the coordinator has (TV0/1: AddPartitionsToTxn answered).
    added: set[tuple[str, int]] = field(default_factory=set)
    #: Partitions written to but not added yet (TV0/1).
    pending: set[tuple[str, int]] = field(default_factory=set)
    #: Partitions a batch of this transaction was built for.
    written: set[tuple[str, int]] = field(default_factory=set)
    #: Anything reached the cluster for this transaction (records sent, partitions or offsets
    #: added): an EndTxn is needed to finish it.
    started: bool = False
    #: KIP-360: bump the epoch (InitProducerId with the current id and epoch) after the abort.
    bump_required: bool = False
    #: The error that made the transaction abortable.
    error: KafkaClientError | None = None


class TxnStateMachine:
    def __init__(self) -> None:
        self.state = TxnState.UNINITIALIZED
        self.book = TxnBook()
        self.fatal: KafkaClientError | None = None

    def transition(self, target: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR and target is not TxnState.CLOSED:
            raise self.fatal or StateError("the producer hit a fatal error")
        if self.state is TxnState.CLOSED:
            raise StateError("the producer is closed")
        if self.state not in _ALLOWED[target]:
            raise StateError(f"cannot go from {self.state.value} to {target.value}")
        self.state = target

    def require(self, *states: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self.fatal or StateError("the producer hit a fatal error")
        if self.state is TxnState.ABORTABLE_ERROR and TxnState.ABORTABLE_ERROR not in states:
            raise self.book.error or StateError("the transaction must be aborted")
        if self.state not in states:
            want = ", ".join(s.value for s in states)
            raise StateError(f"the producer is {self.state.value}, not {want}")

    def abortable(self, error: KafkaClientError, bump: bool) -> None:
        """An error that dooms the open transaction (ignored outside one)."""
        if self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.PREPARED,
            TxnState.COMMITTING,
            TxnState.ABORTING,
        ):
            self.book.bump_required = self.book.bump_required or bump
            if self.book.error is None:
                self.book.error = error
            if self.state is not TxnState.ABORTING:
                self.state = TxnState.ABORTABLE_ERROR
        elif self.state is TxnState.ABORTABLE_ERROR:
            self.book.bump_required = self.book.bump_required or bump

    def fail(self, error: KafkaClientError) -> None:
        if self.state is TxnState.CLOSED:
            return
        if self.fatal is None:
            self.fatal = error
        self.state = TxnState.FATAL_ERROR

    def new_transaction(self, tv: int) -> None:
        self.transition(TxnState.IN_TRANSACTION)
        self.book = TxnBook(tv=tv)

    def recovered_transaction(self, tv: int, open_on_coordinator: bool) -> None:
        """A keep-prepared init: the coordinator kept a transaction of an earlier instance
        open (or had none), and this producer may only finish it."""
        self.transition(TxnState.PREPARED)
        self.book = TxnBook(tv=tv, started=open_on_coordinator)

    @property
    def in_transaction(self) -> bool:
        return self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.PREPARED,
            TxnState.COMMITTING,
            TxnState.ABORTING,
            TxnState.ABORTABLE_ERROR,
        )
