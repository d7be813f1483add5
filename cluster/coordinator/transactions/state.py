"""The transaction state machine: states, their Kafka ids and names, and the legal
transitions (Kafka's ``TransactionState.validPreviousStates``).

This module is pure: :func:`check_transition` is the single place that says which
state may follow which, and every state change of the coordinator goes through it.

Lifecycle of one transactional id (TV0/TV1, as librdkafka uses it)::

    Empty / CompleteCommit / CompleteAbort --AddPartitions/AddOffsets--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --all markers written--> CompleteCommit
    Ongoing --EndTxn(abort)---> PrepareAbort  --all markers written--> CompleteAbort
    Empty / Complete* --EndTxn v5 (TV2) abort--> PrepareAbort (an epoch bump, no partitions)
    Ongoing --InitProducerId by a new instance / timeout--> PrepareEpochFence --> PrepareAbort
    Empty / Complete* --InitProducerId--> Empty (epoch bump or new producer id)
    Empty / Complete* --expiration--> Dead (the id is removed)

``PrepareEpochFence`` is never persisted and never a resting state: the coordinator
passes through it and writes ``PrepareAbort`` with the bumped epoch in one step.
``Dead`` is never a resting state either: the id is deleted (a tombstone is written).
"""

from __future__ import annotations

import enum


class TxnState(enum.Enum):
    """Transaction states, valued with the names DescribeTransactions/ListTransactions use."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    # Members are singletons compared by identity, so the identity hash is consistent
    # with equality; Enum's own __hash__ (hash of the name) is a Python call, and the
    # transition table and state sets hash a state a dozen times per transaction.
    __hash__ = object.__hash__

    @property
    def id(self) -> int:
        """Kafka's byte id of the state (TransactionLogValue.TransactionStatus)."""
        return _IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state, sid in _IDS.items():
            if sid == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        for state in cls:
            if state.value == name:
                return state
        return None

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may be expired."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        """PrepareCommit or PrepareAbort: the decision is durable, markers are pending."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def can_start_transaction(self) -> bool:
        """A new transaction (Ongoing) may begin from this state."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def has_open_transaction(self) -> bool:
        return self in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_IDS: dict[TxnState, int] = {
    TxnState.EMPTY: 0,
    TxnState.ONGOING: 1,
    TxnState.PREPARE_COMMIT: 2,
    TxnState.PREPARE_ABORT: 3,
    TxnState.COMPLETE_COMMIT: 4,
    TxnState.COMPLETE_ABORT: 5,
    TxnState.DEAD: 6,
    TxnState.PREPARE_EPOCH_FENCE: 7,
}

S = TxnState

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Empty/Complete* -> PrepareAbort: a TV2 client aborts a transaction that added no
    # partition (the abort still bumps its epoch; Kafka 4.x allows it).
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
"""target state -> the states it may be entered from (Kafka's validPreviousStates)."""

RESTING_STATES: frozenset[TxnState] = frozenset(
    {S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
)
"""States a transactional id can be observed in (and persisted with)."""


class IllegalTransition(RuntimeError):
    """A state change the transition table forbids: a coordinator bug, never a client error."""

    def __init__(self, source: TxnState, target: TxnState, transactional_id: str = "") -> None:
        who = f" for {transactional_id!r}" if transactional_id else ""
        super().__init__(
            f"illegal transaction state transition{who}: {source.value} -> {target.value}"
        )
        self.source = source
        self.target = target


def is_legal(source: TxnState, target: TxnState) -> bool:
    return source in VALID_PREVIOUS[target]


def check_transition(source: TxnState, target: TxnState, transactional_id: str = "") -> None:
    """Raise :class:`IllegalTransition` unless ``source -> target`` is legal."""
    if not is_legal(source, target):
        raise IllegalTransition(source, target, transactional_id)


__all__ = [
    "RESTING_STATES",
    "VALID_PREVIOUS",
    "IllegalTransition",
    "TxnState",
    "check_transition",
    "is_legal",
]
