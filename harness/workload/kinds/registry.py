"""Every workload user kind, once; every per-kind table is derived from :data:`KINDS`.

Adding a kind: write its module in this package (spec, worker, ``KIND``), import it here and
add its ``KIND`` to :data:`KINDS`. The order is the order of the ``kind`` tags in validation
errors and the order in which a crash fault picks the kind of user it kills.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field

from . import (
    dual_writer,
    eos_copier,
    hostile_client,
    idempotent_producer,
    java_eos_copier,
    java_read_committed_consumer,
    java_transactional_producer,
    read_committed_consumer,
    transactional_producer,
    tv2_copier,
    tv2_producer,
)
from .kind import UserKind

KINDS: tuple[UserKind, ...] = (
    transactional_producer.KIND,
    idempotent_producer.KIND,
    read_committed_consumer.KIND,
    eos_copier.KIND,
    tv2_producer.KIND,
    tv2_copier.KIND,
    dual_writer.KIND,
    java_transactional_producer.KIND,
    java_read_committed_consumer.KIND,
    java_eos_copier.KIND,
    hostile_client.KIND,
)

BY_NAME: dict[str, UserKind] = {k.name: k for k in KINDS}
if len(BY_NAME) != len(KINDS):
    raise RuntimeError("two user kinds share a name")


def user_kind(name: str) -> UserKind:
    """The registered kind called ``name`` (a validated spec's ``kind`` always is one)."""
    return BY_NAME[name]


def spec_union() -> Any:
    """The ``users:`` entry type: the kinds' specs, told apart by their ``kind`` tag."""
    specs = tuple(k.spec for k in KINDS)
    return Annotated[Union[specs], Field(discriminator="kind")]  # noqa: UP007


def crash_faults() -> list[str]:
    """The client crash faults some kind can take, in registry order."""
    return list(dict.fromkeys(fault for k in KINDS for fault in k.crash_holds))


def crash_targets(fault: str) -> list[tuple[str, str]]:
    """``(kind, hold point)`` of every kind that can take the client crash ``fault``."""
    return [(k.name, k.crash_holds[fault]) for k in KINDS if fault in k.crash_holds]
