"""The one description of a workload user kind that every per-kind lookup reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..spec import UserSpecBase
    from ..workers import Worker


@dataclass(frozen=True)
class UserKind:
    """A user kind: what a scenario writes, what runs it, and how it is named and crashed."""

    #: The pydantic model of its ``users:`` entries; its ``kind`` literal is the kind's name.
    spec: type[UserSpecBase]
    #: The locust-free logic of one user (start, one task per step, stop).
    worker: type[Worker]
    #: Default process-name prefix of its users (``<prefix>-<n>``).
    prefix: str
    #: Name of its locust user base class, built in the workload process (locust's
    #: distributed mode sends class names, so master and workers must derive the same).
    locust_user: str
    #: The client crash faults it can take, with the point where its process is killed
    #: (``crash_producer`` -> ``before-commit``; see :mod:`..crashable`).
    crash_holds: Mapping[str, str] = field(default_factory=dict)
    #: Whether its clients include librdkafka (confluent-kafka): native code that can abort the
    #: whole process (an ``rd_assert``).  Under ``workload.isolation: process`` such users run
    #: in a process of their own, so a crash is a finding and the user restarts (isolated.py).
    native_client: bool = True
    #: Whether its users take a prepared transaction back after a restart (KIP-939's
    #: InitProducerId ``keepPreparedTxn``): a cluster without KIP-939 recovery cannot run them.
    keeps_prepared_transactions: bool = False

    @property
    def name(self) -> str:
        """The ``kind:`` value of its scenario entries."""
        default = self.spec.model_fields["kind"].default
        assert isinstance(default, str), f"{self.spec.__name__}.kind has no Literal default"
        return default
