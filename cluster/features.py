"""Finalized cluster features (KIP-584), of which this cluster knows one:
``transaction.version`` (KIP-890), levels 0-2.

The controller holds the finalized levels and persists them with its state; every
node learns them with the cluster view (``ClusterView.features``). This module is
what the rest of the node asks ("which transaction version is finalized now?") and
the controller's validation of an UpdateFeatures request, which follows Kafka's
FeatureControlManager: a level outside the supported range is refused; a lower level
needs a (safe or unsafe) downgrade type and a higher one an upgrade; level 0 removes
the feature from the finalized set.

As in Apache Kafka, the level gates the transaction log's records and nothing else:
level 0 keeps the coordinator's values at version 0, which cannot carry a TV2
client's fields, so a request with TV2 semantics (Produce v12, TxnOffsetCommit v5,
EndTxn v5) is refused with UNSUPPORTED_VERSION there; from level 1 on the values are
version 1 and every request is served by its own version's rules (TV2 semantics
follow the request version, not the level). The broker's verification of old
clients' transactional writes (KIP-890 part 1) is governed by
``transaction.partition.verification.enable`` alone, at every level (Kafka's
ReplicaManager reads the setting, never the feature). Level 2 is what tells new
clients (Kafka's own, ours) to speak the TV2 protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

TRANSACTION_VERSION = "transaction.version"

SUPPORTED: dict[str, tuple[int, int]] = {TRANSACTION_VERSION: (0, 2)}
"""Feature -> (min, max) level this node's code supports."""

DEFAULT_TRANSACTION_VERSION = 2  # Kafka 4.x formats new clusters at TV2

UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


class _HasFeatures(Protocol):
    features: dict[str, int]


def transaction_version(view: _HasFeatures) -> int:
    """The finalized transaction.version of a cluster view (0 when not finalized)."""
    return view.features.get(TRANSACTION_VERSION, 0)


def writes_tv2_records(level: int | None) -> bool:
    """Whether the coordinator may write a TV2 client's state at this finalized level
    (None: unknown, e.g. a coordinator unit without a cluster): not at level 0, whose
    version-0 values cannot carry the client's transaction version (Kafka's
    TransactionLogValue refuses to write it, and the request gets UNSUPPORTED_VERSION)."""
    return level is None or level >= 1


def finalized(levels: dict[str, int]) -> dict[str, int]:
    """The levels a node reports as finalized: level 0 means "not finalized"."""
    return {name: level for name, level in sorted(levels.items()) if level > 0}


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int = UPGRADE


def validate_update(current: dict[str, int], update: FeatureUpdate) -> tuple[int, str | None]:
    """(error code, message) for one update against the current finalized levels."""
    name, level = update.name, update.level

    def refuse(reason: str) -> tuple[int, str | None]:
        return (
            int(ErrorCode.invalid_update_version),
            f"Invalid update version {level} for feature {name}. {reason}",
        )

    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return refuse("The controller does not support the given upgrade type.")
    if level < 0:
        return refuse("A feature version cannot be less than 0.")
    supported = SUPPORTED.get(name)
    if supported is None:
        return refuse("The controller does not support this feature.")
    low, high = supported
    if not low <= level <= high:
        return refuse(f"The nodes of this cluster support levels {low} to {high} only.")
    now = current.get(name, 0)
    if level < now and update.upgrade_type == UPGRADE:
        return refuse(
            "Can't downgrade the version of this feature without setting the upgrade "
            "type to either safe or unsafe downgrade."
        )
    if level > now and update.upgrade_type != UPGRADE:
        return refuse("Can't downgrade to a newer version.")
    return int(ErrorCode.none), None
