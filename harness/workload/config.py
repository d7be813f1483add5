"""The workload part of a scenario: topics, users per kind with their parameters, client overrides.

YAML shape (the scenario layer embeds this under ``workload:``)::

    topics:
      - {name: events, partitions: 6}
      - {name: copies, partitions: 3}
    client_config: {"socket.timeout.ms": 10000}     # applied to every client
    users:
      - kind: transactional_producer
        count: 2
        topics: [events]
        records_per_txn: 10
        partitions_per_txn: 3
        abort_probability: 0.2
        flush_before_abort_probability: 0.5
        transaction_timeout_ms: 20000
      - kind: idempotent_producer
        topics: [events]
      - kind: read_committed_consumer
        mode: subscribe            # or assign
        group_id: readers
        topics: [events]
      - kind: eos_copier
        input_topics: [events]
        output_topic: copies
        group_id: copiers

Every model forbids unknown keys, so a typo is an error that names the field
(``users.0.transactional_producer.abort_probabilty: Extra inputs are not permitted``).
:func:`load_workload` turns pydantic's errors into one :class:`WorkloadConfigError` listing each
bad field by its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ClientValue = str | int | float | bool

#: client.id / process names: letters, digits, '.', '_' and '-' (no '|' or '/': history names).
NAME_PATTERN = r"^[A-Za-z0-9._-]+$"


class WorkloadConfigError(ValueError):
    """The workload configuration is invalid; the message names every bad field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopicSpec(_Model):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=249)]
    partitions: Annotated[int, Field(ge=1, le=10_000)] = 3
    replication_factor: Annotated[int, Field(ge=1)] = 1
    #: Create the topic before the users start (False: it must exist already).
    create: bool = True


class _UserSpec(_Model):
    #: Process-name prefix for these users (default: the kind's short name); users are
    #: named ``<name>-<n>``, unique within the run directory.
    name: Annotated[str | None, Field(pattern=NAME_PATTERN, max_length=100)] = None
    #: How many users of this spec run (locust ``fixed_count``).
    count: Annotated[int, Field(ge=0, le=10_000)] = 1
    #: Per-user rate of tasks (transactions, batches or polls) per second; None = as fast as
    #: possible.  Implemented with locust's ``constant_throughput``.
    rate: Annotated[float | None, Field(gt=0)] = None
    #: Fixed pause between tasks in ms when ``rate`` is not set.
    pause_ms: Annotated[float, Field(ge=0)] = 0.0
    #: librdkafka properties for these users' clients (override ``client_config``).
    client_config: dict[str, ClientValue] = Field(default_factory=dict)
    #: Timeout of one blocking transactional call (init/commit/abort/send_offsets), seconds.
    op_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0


class _ProducerSpec(_UserSpec):
    topics: Annotated[list[str], Field(min_length=1)]
    #: Extra bytes per record, carried in a ``txnchaos-pad`` header so the value stays
    #: ``encode_value(...)`` (self-describing) whatever the message size.
    padding_bytes: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    #: Give each record a key (``<partition>``) so keyed-record paths are exercised.
    keyed: bool = True


class TransactionalProducerSpec(_ProducerSpec):
    kind: Literal["transactional_producer"] = "transactional_producer"
    #: k: records per transaction.
    records_per_txn: Annotated[int, Field(ge=1, le=100_000)] = 10
    #: Distinct partitions (across ``topics``) each transaction writes to.
    partitions_per_txn: Annotated[int, Field(ge=1)] = 2
    abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.1
    #: Chance of flush() before abort_transaction(), so aborted records reach the log
    #: (librdkafka purges unsent records on abort).
    flush_before_abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.5
    transaction_timeout_ms: Annotated[int, Field(ge=1000, le=2_147_483_647)] = 60_000
    #: transactional.id; ``{process}`` and ``{index}`` (the user's number within this spec)
    #: are substituted.  ``{process}`` (default) gives each user its own id; a template on
    #: ``{index}`` alone makes a restarted user fence its previous incarnation.
    transactional_id: Annotated[str, Field(min_length=1)] = "{process}"
    #: Retries of a commit_transaction that fails retriably before it is recorded as unknown.
    commit_retries: Annotated[int, Field(ge=0, le=100)] = 3


class IdempotentProducerSpec(_ProducerSpec):
    kind: Literal["idempotent_producer"] = "idempotent_producer"
    #: Records produced per task before the task flushes and waits for their acks.
    records_per_batch: Annotated[int, Field(ge=1, le=100_000)] = 10


class ReadCommittedConsumerSpec(_UserSpec):
    kind: Literal["read_committed_consumer"] = "read_committed_consumer"
    topics: Annotated[list[str], Field(min_length=1)]
    #: subscribe: group membership with rebalances; assign: every partition of ``topics``,
    #: from the log start, no group management.
    mode: Literal["subscribe", "assign"] = "subscribe"
    #: Consumer group (default ``txnchaos-<name>``; assign mode still needs one for librdkafka).
    group_id: Annotated[str | None, Field(min_length=1)] = None
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    max_records_per_poll: Annotated[int, Field(ge=1, le=100_000)] = 500
    poll_timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 500
    #: subscribe mode: commit the consumed positions every N non-empty polls (0 = never).
    commit_every_polls: Annotated[int, Field(ge=0)] = 1


class EOSCopierSpec(_UserSpec):
    kind: Literal["eos_copier"] = "eos_copier"
    input_topics: Annotated[list[str], Field(min_length=1)]
    output_topic: str
    group_id: Annotated[str | None, Field(min_length=1)] = None
    #: Most input records consumed, copied and committed in one transaction.
    max_records_per_txn: Annotated[int, Field(ge=1, le=100_000)] = 100
    poll_timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 500
    abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.05
    flush_before_abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.5
    transaction_timeout_ms: Annotated[int, Field(ge=1000, le=2_147_483_647)] = 60_000
    transactional_id: Annotated[str, Field(min_length=1)] = "{process}"
    commit_retries: Annotated[int, Field(ge=0, le=100)] = 3
    padding_bytes: Annotated[int, Field(ge=0, le=10_000_000)] = 0

    @model_validator(mode="after")
    def _distinct_topics(self) -> EOSCopierSpec:
        if self.output_topic in self.input_topics:
            raise ValueError(
                f"output_topic {self.output_topic!r} must not be one of input_topics "
                "(a copier reading its own output never settles)"
            )
        return self


#: ``transaction.version`` our producer uses: None follows the cluster's finalized feature
#: (TV2 where the cluster offers it, the old protocol where it does not); 0, 1 or 2 forces it.
TransactionVersion = Annotated[int | None, Field(ge=0, le=2)]


class Tv2ProducerSpec(TransactionalProducerSpec):
    """A transactional producer on our own client (``harness/clients``), which speaks
    KIP-890's new protocol (TV2). Same parameters as ``transactional_producer`` (``client_config``
    is not used: it holds librdkafka properties), plus ``transaction_version``."""

    kind: Literal["tv2_producer"] = "tv2_producer"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None


class Tv2CopierSpec(EOSCopierSpec):
    """An ``eos_copier`` whose producer is our own client (its consumer stays confluent-kafka)."""

    kind: Literal["tv2_copier"] = "tv2_copier"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None


UserSpec = Annotated[
    TransactionalProducerSpec
    | IdempotentProducerSpec
    | ReadCommittedConsumerSpec
    | EOSCopierSpec
    | Tv2ProducerSpec
    | Tv2CopierSpec,
    Field(discriminator="kind"),
]

#: Short default process-name prefix per kind.
KIND_PREFIX: dict[str, str] = {
    "transactional_producer": "txn-producer",
    "idempotent_producer": "idem-producer",
    "read_committed_consumer": "consumer",
    "eos_copier": "copier",
    "tv2_producer": "tv2-producer",
    "tv2_copier": "tv2-copier",
}


class WorkloadConfig(_Model):
    topics: Annotated[list[TopicSpec], Field(min_length=1)]
    users: list[UserSpec] = Field(default_factory=list)
    #: librdkafka properties for every client (a user spec's client_config wins).
    client_config: dict[str, ClientValue] = Field(default_factory=dict)
    #: Statistics interval for producers (producer id/epoch come from librdkafka's stats);
    #: 0 disables.
    statistics_interval_ms: Annotated[int, Field(ge=0)] = 1000

    @model_validator(mode="after")
    def _cross_checks(self) -> WorkloadConfig:
        names = [t.name for t in self.topics]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"topics: duplicate topic names {dup}")
        known = set(names)
        prefixes: dict[str, int] = {}
        for i, u in enumerate(self.users):
            where = f"users.{i} ({u.kind})"
            refs: list[tuple[str, str]] = []
            if isinstance(u, EOSCopierSpec):
                refs = [("input_topics", t) for t in u.input_topics]
                refs.append(("output_topic", u.output_topic))
            else:
                refs = [("topics", t) for t in u.topics]
            for field, t in refs:
                if t not in known:
                    raise ValueError(
                        f"{where}.{field}: topic {t!r} is not declared in topics ({sorted(known)})"
                    )
            if isinstance(u, TransactionalProducerSpec):
                total = sum(self.partitions(t) for t in u.topics)
                if u.partitions_per_txn > total:
                    raise ValueError(
                        f"{where}.partitions_per_txn: {u.partitions_per_txn} exceeds the "
                        f"{total} partitions of {u.topics}"
                    )
            prefix = self.process_prefix(u)
            if prefix in prefixes:
                raise ValueError(
                    f"{where}.name: process-name prefix {prefix!r} is also used by "
                    f"users.{prefixes[prefix]}; give one of them a distinct name"
                )
            prefixes[prefix] = i
        return self

    # -- helpers ------------------------------------------------------------------------

    def partitions(self, topic: str) -> int:
        for t in self.topics:
            if t.name == topic:
                return t.partitions
        raise KeyError(topic)

    @staticmethod
    def process_prefix(u: Any) -> str:
        return u.name or KIND_PREFIX[u.kind]

    def client_overrides(self, u: Any) -> dict[str, ClientValue]:
        return {**self.client_config, **u.client_config}


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(workload)"
        msg = e["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        lines.append(f"  {loc}: {msg}")
    return "invalid workload configuration:\n" + "\n".join(lines)


def load_workload(data: Mapping[str, Any] | WorkloadConfig) -> WorkloadConfig:
    """Validate a parsed (YAML/JSON) workload mapping; raise :class:`WorkloadConfigError`."""
    if isinstance(data, WorkloadConfig):
        return data
    if not isinstance(data, Mapping):
        raise WorkloadConfigError(
            f"invalid workload configuration: expected a mapping, got {type(data).__name__}"
        )
    try:
        return WorkloadConfig.model_validate(dict(data))
    except ValidationError as e:
        raise WorkloadConfigError(_format_errors(e)) from None
