"""What ApiVersions offers: the served version ranges, and Produce from v0 as Kafka 4.x
offers it (KAFKA-18659) while v0-v2 stay refused."""

from __future__ import annotations

from typing import Any

from txnchaos.cluster.server.dispatch import ApiRegistry
from txnchaos.cluster.server.server import KafkaServer, register_api_versions


async def _never(ctx: Any, request: Any) -> Any:  # pragma: no cover - never called
    raise AssertionError("not called")


def test_produce_is_offered_from_v0_and_still_served_from_v3() -> None:
    registry = ApiRegistry()
    registry.register(0, 3, 12, _never, "test")
    registry.register(1, 4, 16, _never, "test")
    server = KafkaServer(registry)
    register_api_versions(registry, server)
    ranges = {
        r["api_key"]: (r["min_version"], r["max_version"]) for r in server.api_version_ranges()
    }
    assert ranges[0] == (0, 12)  # Produce, as Kafka 4.4.0 answers it
    assert ranges[1] == (4, 16)  # others as served
    assert not registry.supports(0, 2) and registry.supports(0, 3)
