"""Shared helpers of the second hardening round's tests (issue 35): exact requests
against a real cluster, as the outside probe sent them."""

from __future__ import annotations

from typing import Any

from txnchaos.harness.launch.local import LocalCluster

from ..raw_client import RawClient, address

INVALID_CONFIG = 40


def client(cluster: LocalCluster, client_id: str = "hardening-probe") -> RawClient:
    """A client of the first broker."""
    return RawClient(*address(cluster.state()["bootstrap"]), client_id=client_id)


def controller_client(cluster: LocalCluster, client_id: str = "hardening-probe") -> RawClient:
    """A client of the node hosting the controller (CreateTopics goes there)."""
    spec = cluster.layout.controller_node()
    return RawClient("127.0.0.1", spec.port, client_id=client_id)


def create_topic(
    raw: RawClient, name: str, configs: dict[str, str] | None = None, partitions: int = 1
) -> Any:
    """CreateTopics v7 for one topic; its result entry."""
    r = raw.request(
        19,
        7,
        topics=[
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        timeout_ms=30000,
        validate_only=False,
    )
    return r.topics[0]


def produce_one(raw: RawClient, topic: str, partition: int = 0, value: bytes = b"v") -> Any:
    from txnchaos.cluster.protocol.records import encode_batch

    return raw.produce(topic, partition, encode_batch([value]))


def leader_client(cluster: LocalCluster, topic: str, partition: int) -> RawClient:
    """A client of the broker leading ``topic``-``partition``."""
    raw = client(cluster)
    try:
        r = raw.request(
            3,
            12,
            topics=[{"name": topic, "topic_id": None}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    finally:
        raw.close()
    leader = next(p.leader_id for p in r.topics[0].partitions if p.partition_index == partition)
    port = next(n["port"] for n in cluster.state()["nodes"] if n["id"] == leader)
    return RawClient("127.0.0.1", port, client_id="hardening-probe")


def produce_to_leader(cluster: LocalCluster, topic: str, partition: int) -> Any:
    raw = leader_client(cluster, topic, partition)
    try:
        return produce_one(raw, topic, partition)
    finally:
        raw.close()
