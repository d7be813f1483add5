"""The workload part of a scenario: topics, users per kind with their parameters, client overrides.

YAML shape (the scenario layer embeds this under ``workload:``)::

    topics:
      - {name: events, partitions: 6}
      - {name: copies, partitions: 3}
    client_config: {"socket.timeout.ms": 10000}     # applied to every client
    isolation: process         # librdkafka users each in a process of their own (or: shared)
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
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from .kinds.registry import spec_union, user_kind
from .spec import NAME_PATTERN, ClientValue, SpecModel, UserSpecBase


class WorkloadConfigError(ValueError):
    """The workload configuration is invalid; the message names every bad field."""


def _config_text(value: Any) -> Any:
    """A topic setting's value as Kafka's configs carry it: text (a bool as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class TopicSpec(SpecModel):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=249)]
    partitions: Annotated[int, Field(ge=1, le=10_000)] = 3
    replication_factor: Annotated[int, Field(ge=1)] = 1
    #: Create the topic before the users start (False: it must exist already).
    create: bool = True
    #: Topic settings sent with its CreateTopics (``{retention.ms: 600000}``); numbers and
    #: booleans as Kafka writes them (``600000``, ``true``).
    configs: dict[str, str] = Field(default_factory=dict)

    @field_validator("configs", mode="before")
    @classmethod
    def _config_values_as_text(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: _config_text(v) for k, v in value.items()}


#: One ``users:`` entry: any registered kind's spec (:mod:`.kinds.registry`).
if TYPE_CHECKING:
    UserSpec = UserSpecBase
else:
    UserSpec = spec_union()


class WorkloadConfig(SpecModel):
    topics: Annotated[list[TopicSpec], Field(min_length=1)]
    users: list[UserSpec] = Field(default_factory=list)
    #: librdkafka properties for every client (a user spec's client_config wins).
    client_config: dict[str, ClientValue] = Field(default_factory=dict)
    #: Statistics interval for producers (producer id/epoch come from librdkafka's stats);
    #: 0 disables.
    statistics_interval_ms: Annotated[int, Field(ge=0)] = 1000
    #: Where users with a native client (librdkafka) run: ``process``, each in a process of
    #: its own, so a client library that aborts (an assertion, a segfault) is a finding and the
    #: user restarts while the others keep running (isolated.py); ``shared``, all in the
    #: workload process (cheaper for hundreds of users: a crash there ends the workload).
    isolation: Literal["process", "shared"] = "process"

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
            for field, t in u.topic_refs():
                if t not in known:
                    raise ValueError(
                        f"{where}.{field}: topic {t!r} is not declared in topics ({sorted(known)})"
                    )
            problem = u.problem_in(self)
            if problem is not None:
                raise ValueError(f"{where}.{problem}")
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
        return u.name or user_kind(u.kind).prefix

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
