"""Changing a running cluster's ``transaction.version`` for a bench phase (UpdateFeatures,
as ``txnchaos cluster features --set``), and waiting until every node serves the new level,
so that phases under different levels share one cluster and one run."""

from __future__ import annotations

import time
from collections.abc import Iterable

from txnchaos.cluster.features import TRANSACTION_VERSION
from txnchaos.harness.features_admin import FeatureChangeRefused, features


def node_level(address: str) -> int:
    """The transaction.version one node reports as finalized (ApiVersions)."""
    return features(address).finalized.get(TRANSACTION_VERSION, 0)


def set_transaction_version(
    bootstrap: str, node_addresses: Iterable[str], level: int, timeout_s: float = 30.0
) -> None:
    """Finalize ``level`` (an upgrade or a safe downgrade) and return once every node in
    ``node_addresses`` reports it; SystemExit if the cluster refuses it or is slow to agree."""
    try:
        features(bootstrap, {TRANSACTION_VERSION: level})
    except FeatureChangeRefused as exc:
        raise SystemExit(f"transaction.version={level} refused: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    waiting = list(node_addresses)
    while waiting:
        waiting = [a for a in waiting if node_level(a) != level]
        if waiting and time.monotonic() > deadline:
            raise SystemExit(f"nodes {waiting} still not at transaction.version={level}")
        if waiting:
            time.sleep(0.05)
