"""Separate coordinator processes: groups spread over coordinator nodes by hashing
onto internal partitions; a restarted coordinator recovers its groups' offsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import start_cluster
from txnchaos.cluster.coordinator.placement import KEY_TYPE_GROUP, CoordinatorPlacement
from txnchaos.harness.launch.local import LocalCluster

from .raw_client import RawClient, address
from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def split_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("split"), brokers=2, coordinators=2)
    yield cluster
    cluster.down()


def test_roles_and_placement(split_cluster: LocalCluster) -> None:
    state = split_cluster.state()
    roles = {n["id"]: n["role"] for n in state["nodes"]}
    assert roles == {1001: "coordinator", 1002: "coordinator", 1: "broker", 2: "broker"}
    # Bootstrap lists brokers only; partitions live only on brokers.
    assert len(state["bootstrap"].split(",")) == 2

    placement = CoordinatorPlacement((1001, 1002))
    groups = [f"g{i}" for i in range(20)]
    owners = {g: placement.owner(KEY_TYPE_GROUP, g) for g in groups}
    assert set(owners.values()) == {1001, 1002}
    client = RawClient(*address(state["bootstrap"]))
    try:
        r = client.request(10, 4, key_type=0, coordinator_keys=groups)
        assert {c.key: c.node_id for c in r.coordinators} == owners
        assert all(c.error_code == 0 for c in r.coordinators)
    finally:
        client.close()


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        consumer.close()


def test_coordinator_restart_keeps_offsets(split_cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap = split_cluster.state()["bootstrap"]
    topic = "split-topic"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for _ in range(10):
        producer.produce(topic, b"x")
    assert producer.flush(10) == 0
    placement = CoordinatorPlacement((1001, 1002))
    group = next(
        g for g in (f"grp-{i}" for i in range(100)) if placement.owner(KEY_TYPE_GROUP, g) == 1002
    )
    _commit(bootstrap, group, topic, 7)
    assert _committed(bootstrap, group, topic) == 7

    split_cluster.kill_node(1002)
    split_cluster.restart_node(1002)
    assert _committed(bootstrap, group, topic) == 7
