"""The pydantic bases every user kind's spec builds on (the kinds live in :mod:`.kinds`).

Kept apart from :mod:`.config` so a kind module can define its spec without importing the
workload config, which assembles the kinds' specs into its ``users`` union.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .config import WorkloadConfig

ClientValue = str | int | float | bool

#: client.id / process names: letters, digits, '.', '_' and '-' (no '|' or '/': history names).
NAME_PATTERN = r"^[A-Za-z0-9._-]+$"

#: ``transaction.version`` our producer uses: None follows the cluster's finalized feature
#: (TV2 where the cluster offers it, the old protocol where it does not); 0, 1 or 2 forces it.
TransactionVersion = Annotated[int | None, Field(ge=0, le=2)]


class UserPrepareError(RuntimeError):
    """What a user's clients need could not be had (a release that does not exist, no JDK):
    the workload stops before any user starts, with this one line."""


class SpecModel(BaseModel):
    """Unknown keys are errors that name the field (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class UserSpecBase(SpecModel):
    """What every user kind's spec has; a kind adds its own ``kind`` literal and parameters."""

    #: The kind's name (each spec narrows it to a ``Literal``: the union's discriminator).
    kind: str
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

    def topic_refs(self) -> list[tuple[str, str]]:
        """``(field, topic)`` for every topic this user names: each must be declared."""
        return []

    def problem_in(self, config: WorkloadConfig) -> str | None:
        """What is wrong with this user in ``config`` (``field: message``), checked once its
        topics are known to be declared; None when nothing is."""
        return None

    def prepare(self, run_dir: Path) -> None:
        """Fetch or build what these users' clients need, once, before any user starts (the
        run's clock then does not count it); raises :class:`UserPrepareError`."""
        return None


class ProducerSpecBase(UserSpecBase):
    topics: Annotated[list[str], Field(min_length=1)]
    #: Extra bytes per record, carried in a ``txnchaos-pad`` header so the value stays
    #: ``encode_value(...)`` (self-describing) whatever the message size.
    padding_bytes: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    #: Give each record a key (``<partition>``) so keyed-record paths are exercised.
    keyed: bool = True

    def topic_refs(self) -> list[tuple[str, str]]:
        return [("topics", t) for t in self.topics]
