"""Error classification for our producer: what the client does after each error code.

One table per request kind, after Apache Kafka's Java client (``Sender`` and the handlers of
``TransactionManager``) and the seeds: KIP-890 (TRANSACTION_ABORTABLE is abortable; on Produce
INVALID_TXN_STATE is abortable, on TxnOffsetCommit INVALID_TXN_STATE and
INVALID_PRODUCER_ID_MAPPING are fatal) and KIP-360 (UNKNOWN_PRODUCER_ID is abortable and asks for
an epoch bump). Java, not librdkafka, is the reference where they differ: INVALID_PRODUCER_EPOCH
on Produce is abortable (KIP-588: the coordinator bumped the epoch, e.g. on a timeout), fatal on
coordinator requests.
"""

from __future__ import annotations

import enum

from txnchaos.cluster.protocol.error_names import error_name

NONE = 0
UNKNOWN_SERVER_ERROR = -1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
BROKER_NOT_AVAILABLE = 8
MESSAGE_TOO_LARGE = 10
NETWORK_EXCEPTION = 13
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
KAFKA_STORAGE_ERROR = 56
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_PRODUCER_ID = 59
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
FENCED_INSTANCE_ID = 82
INVALID_RECORD = 87
THROTTLING_QUOTA_EXCEEDED = 89
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120


class Action(enum.Enum):
    """What the client does next."""

    OK = "ok"  #: success (DUPLICATE_SEQUENCE_NUMBER on Produce: already written)
    RETRY = "retry"  #: send again after the backoff
    REFRESH = "refresh"  #: refresh metadata (leader moved), then send again
    COORDINATOR = "coordinator"  #: find the coordinator again, then send again
    ABORTABLE = "abortable"  #: the transaction must be aborted; the producer lives on
    BUMP = "bump"  #: abortable, and the epoch must be bumped (KIP-360)
    FATAL = "fatal"  #: the producer is unusable (fenced, unauthorized, unsupported)


class ErrorClass(enum.StrEnum):
    """The class an application sees (what the workload records)."""

    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"


_FATAL_COMMON = {
    CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNSUPPORTED_VERSION,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    PRODUCER_FENCED,
}

PRODUCE: dict[int, Action] = {
    NONE: Action.OK,
    DUPLICATE_SEQUENCE_NUMBER: Action.OK,
    NOT_LEADER_OR_FOLLOWER: Action.REFRESH,
    UNKNOWN_TOPIC_OR_PARTITION: Action.REFRESH,
    LEADER_NOT_AVAILABLE: Action.REFRESH,
    FENCED_LEADER_EPOCH: Action.REFRESH,
    UNKNOWN_LEADER_EPOCH: Action.REFRESH,
    KAFKA_STORAGE_ERROR: Action.REFRESH,
    REQUEST_TIMED_OUT: Action.RETRY,
    NETWORK_EXCEPTION: Action.RETRY,
    NOT_ENOUGH_REPLICAS: Action.RETRY,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: Action.RETRY,
    CORRUPT_MESSAGE: Action.RETRY,
    CONCURRENT_TRANSACTIONS: Action.RETRY,
    COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    COORDINATOR_NOT_AVAILABLE: Action.RETRY,
    NOT_COORDINATOR: Action.RETRY,
    THROTTLING_QUOTA_EXCEEDED: Action.RETRY,
    BROKER_NOT_AVAILABLE: Action.RETRY,
    OUT_OF_ORDER_SEQUENCE_NUMBER: Action.BUMP,
    UNKNOWN_PRODUCER_ID: Action.BUMP,
    INVALID_PRODUCER_ID_MAPPING: Action.BUMP,
    INVALID_PRODUCER_EPOCH: Action.ABORTABLE,
    INVALID_TXN_STATE: Action.ABORTABLE,
    TRANSACTION_ABORTABLE: Action.ABORTABLE,
    TOPIC_AUTHORIZATION_FAILED: Action.ABORTABLE,
    MESSAGE_TOO_LARGE: Action.ABORTABLE,
    RECORD_LIST_TOO_LARGE: Action.ABORTABLE,
    INVALID_RECORD: Action.ABORTABLE,
    INVALID_TIMESTAMP: Action.ABORTABLE,
    **dict.fromkeys(_FATAL_COMMON, Action.FATAL),
}

_COORDINATOR_COMMON: dict[int, Action] = {
    NONE: Action.OK,
    COORDINATOR_NOT_AVAILABLE: Action.COORDINATOR,
    NOT_COORDINATOR: Action.COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    CONCURRENT_TRANSACTIONS: Action.RETRY,
    REQUEST_TIMED_OUT: Action.RETRY,
    NETWORK_EXCEPTION: Action.RETRY,
    INVALID_PRODUCER_EPOCH: Action.FATAL,
    INVALID_TXN_STATE: Action.FATAL,
    TRANSACTION_ABORTABLE: Action.ABORTABLE,
    UNKNOWN_PRODUCER_ID: Action.BUMP,
    INVALID_PRODUCER_ID_MAPPING: Action.BUMP,
    **dict.fromkeys(_FATAL_COMMON, Action.FATAL),
}

ADD_PARTITIONS: dict[int, Action] = {
    **_COORDINATOR_COMMON,
    UNKNOWN_TOPIC_OR_PARTITION: Action.ABORTABLE,
    TOPIC_AUTHORIZATION_FAILED: Action.ABORTABLE,
    OPERATION_NOT_ATTEMPTED: Action.ABORTABLE,
}

ADD_OFFSETS: dict[int, Action] = {
    **_COORDINATOR_COMMON,
    GROUP_AUTHORIZATION_FAILED: Action.ABORTABLE,
}

END_TXN: dict[int, Action] = dict(_COORDINATOR_COMMON)

INIT_PRODUCER_ID: dict[int, Action] = {
    **_COORDINATOR_COMMON,
    INVALID_TRANSACTION_TIMEOUT: Action.FATAL,
    TRANSACTION_ABORTABLE: Action.FATAL,
    UNKNOWN_PRODUCER_ID: Action.FATAL,
    INVALID_PRODUCER_ID_MAPPING: Action.FATAL,
}

TXN_OFFSET_COMMIT: dict[int, Action] = {
    NONE: Action.OK,
    COORDINATOR_NOT_AVAILABLE: Action.COORDINATOR,
    NOT_COORDINATOR: Action.COORDINATOR,
    REQUEST_TIMED_OUT: Action.COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    UNKNOWN_TOPIC_OR_PARTITION: Action.RETRY,
    CONCURRENT_TRANSACTIONS: Action.RETRY,
    NETWORK_EXCEPTION: Action.RETRY,
    UNKNOWN_MEMBER_ID: Action.ABORTABLE,
    ILLEGAL_GENERATION: Action.ABORTABLE,
    FENCED_INSTANCE_ID: Action.ABORTABLE,
    REBALANCE_IN_PROGRESS: Action.ABORTABLE,
    GROUP_AUTHORIZATION_FAILED: Action.ABORTABLE,
    TRANSACTION_ABORTABLE: Action.ABORTABLE,
    UNKNOWN_PRODUCER_ID: Action.BUMP,
    INVALID_PRODUCER_EPOCH: Action.FATAL,
    INVALID_TXN_STATE: Action.FATAL,
    INVALID_PRODUCER_ID_MAPPING: Action.FATAL,
    **dict.fromkeys(_FATAL_COMMON, Action.FATAL),
}

FIND_COORDINATOR: dict[int, Action] = {
    NONE: Action.OK,
    COORDINATOR_NOT_AVAILABLE: Action.RETRY,
    NOT_COORDINATOR: Action.RETRY,
    COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    GROUP_AUTHORIZATION_FAILED: Action.ABORTABLE,
    **dict.fromkeys(_FATAL_COMMON, Action.FATAL),
}


def action(table: dict[int, Action], code: int) -> Action:
    """The action for ``code``; an unknown code on Produce is abortable (the batch failed,
    as Java treats any non-retriable, non-fatal error), elsewhere fatal (Java's
    "unexpected error" handlers)."""
    found = table.get(code)
    if found is not None:
        return found
    return Action.ABORTABLE if table is PRODUCE else Action.FATAL


class KafkaClientError(Exception):
    """A failed operation of our client. ``error_class`` says what the caller must do;
    ``maybe_written`` (records only) is True when the records may be in the log."""

    error_class: ErrorClass = ErrorClass.ABORTABLE

    def __init__(
        self,
        message: str,
        code: int | None = None,
        *,
        maybe_written: bool = False,
    ) -> None:
        self.code = code
        self.maybe_written = maybe_written
        label = f"{error_name(code)}: " if code is not None else ""
        super().__init__(f"{label}{message}")

    @property
    def name(self) -> str:
        return error_name(self.code) if self.code is not None else type(self).__name__


class RetriableError(KafkaClientError):
    """The operation did not finish in time (or its outcome is not known yet); calling it
    again continues it."""

    error_class = ErrorClass.RETRIABLE


class AbortableError(KafkaClientError):
    """The current transaction must be aborted; the producer stays usable."""

    error_class = ErrorClass.ABORTABLE


class FatalError(KafkaClientError):
    """The producer is unusable (fenced by a newer instance, unauthorized, unsupported)."""

    error_class = ErrorClass.FATAL


class StateError(KafkaClientError):
    """The call is not allowed in the producer's current state (a programming error)."""

    error_class = ErrorClass.FATAL


class UnsupportedError(FatalError):
    """The cluster does not serve a version the requested protocol needs."""


def exception_for(act: Action, what: str, code: int) -> KafkaClientError:
    if act in (Action.ABORTABLE, Action.BUMP):
        return AbortableError(what, code)
    if act is Action.FATAL:
        return FatalError(what, code)
    return RetriableError(what, code)
