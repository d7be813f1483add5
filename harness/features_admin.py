"""Reading and changing a cluster's finalized features (``txnchaos cluster features``):
ApiVersions v4 to read them, UpdateFeatures v1 to change them, as Kafka's
``kafka-features.sh describe|upgrade|downgrade`` does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..cluster.features import SAFE_DOWNGRADE, UPGRADE
from ..cluster.net.client import PeerConnection
from ..cluster.protocol.build import make
from ..cluster.protocol.codec import request_class
from ..cluster.security.sasl import SaslCredentials


@dataclass(frozen=True, slots=True)
class FeatureState:
    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int

    def to_json(self) -> dict[str, Any]:
        return {
            "finalized_features_epoch": self.epoch,
            "features": {
                name: {
                    "finalized": self.finalized.get(name, 0),
                    "supported_min": low,
                    "supported_max": high,
                }
                for name, (low, high) in sorted(self.supported.items())
            },
        }


class FeatureChangeRefused(Exception):
    pass


def _split(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host, int(port)


async def _describe(conn: PeerConnection) -> FeatureState:
    r = await conn.request(
        make(request_class(18, 4), client_software_name="txnchaos", client_software_version="1")
    )
    return FeatureState(
        supported={f.name: (int(f.min_version), int(f.max_version)) for f in r.supported_features},
        finalized={f.name: int(f.max_version_level) for f in r.finalized_features},
        epoch=int(r.finalized_features_epoch),
    )


async def _run(
    bootstrap: str, changes: dict[str, int], validate_only: bool, sasl: SaslCredentials | None
) -> FeatureState:
    host, port = _split(bootstrap)
    conn = PeerConnection(host, port, client_id="txnchaos-features", sasl=sasl)
    try:
        state = await _describe(conn)
        if not changes:
            return state
        updates = [
            {
                "feature": name,
                "max_version_level": level,
                "upgrade_type": SAFE_DOWNGRADE if level < state.finalized.get(name, 0) else UPGRADE,
            }
            for name, level in changes.items()
        ]
        r = await conn.request(
            make(request_class(57, 1), feature_updates=updates, validate_only=validate_only),
            timeout=60.0,
        )
        if r.error_code != 0:
            raise FeatureChangeRefused(f"{r.error_code.name.upper()}: {r.error_message}")
        return await _describe(conn)
    finally:
        await conn.close()


def features(
    bootstrap: str,
    changes: dict[str, int] | None = None,
    validate_only: bool = False,
    sasl: SaslCredentials | None = None,
) -> FeatureState:
    """The cluster's features after applying ``changes`` (name -> level), if any, logged in
    with ``sasl`` (None: PLAINTEXT)."""
    return asyncio.run(_run(bootstrap, dict(changes or {}), validate_only, sasl))
