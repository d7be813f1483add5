"""Apache Kafka's nodes in containers (``--launcher docker --flavour apache-kafka``): the
release's image built from the project's base on first use, a network per node, every
link proxied on the host, node faults through the engine.

Needs the engine of ``scripts/bootstrap.sh --docker`` and the project's base image (the
``node_image`` fixture builds it with scripts/build-image.sh); without an engine these tests
skip on a developer machine and fail under CI=true. One cluster (2 brokers, 1 controller)
serves the module; the cleanup test starts one of its own and runs nightly."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.harness.launch.helpers import create_topic
from txnchaos.harness.launch.base import ClusterSpec
from txnchaos.harness.launch.docker import LABEL_RUN, _client
from txnchaos.harness.launch.kafka.docker import KafkaDockerHandle, KafkaDockerLauncher
from txnchaos.harness.launch.kafka.release import DEFAULT_VERSION
from txnchaos.harness.workload.final_read import list_ends

pytestmark = [pytest.mark.docker, pytest.mark.kafka, pytest.mark.timeout(1800)]

WAIT_S = 90.0
BROKER_LINKS = ["n1->n1", "n1->n2", "n2->n1", "n2->n2"]


def wait_for(condition: Any, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def kafka(
    docker: Any, node_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaDockerHandle]:
    launcher = KafkaDockerLauncher(docker_host=docker.env.get("DOCKER_HOST"))
    spec = ClusterSpec(brokers=2, coordinators=1, settings=["transaction.version=2"], seed=5)
    handle = launcher.start(spec, tmp_path_factory.mktemp("kafka-docker"))
    yield handle
    handle.stop()


def transaction(bootstrap: str, topic: str, values: list[bytes], commit: bool = True) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 2)
    p.flush(WAIT_S)
    if commit:
        p.commit_transaction(WAIT_S)
    else:
        p.abort_transaction(WAIT_S)


def read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(100, 0.2) if m.error() is None]
        got += [m.value() for m in c.consume(100, 1.0) if m.error() is None]
        return got
    finally:
        c.close()


def test_transactions_through_a_proxy_on_every_link(kafka: KafkaDockerHandle) -> None:
    info = kafka.describe()
    assert (info["flavour"], info["version"], info["launcher"]) == (
        "apache-kafka",
        DEFAULT_VERSION,
        "docker",
    )
    assert info["transaction_version"] == 2
    assert len(set(info["gateways"].values())) == 3  # a network, and gateway, per node
    assert {"client->n1", "client->n2", *BROKER_LINKS, "n1->n1001", "n2->n1001"} == set(kafka.links)
    topic = create_topic(kafka.bootstrap, partitions=2)
    transaction(kafka.bootstrap, topic, [b"c0", b"c1", b"c2"])
    transaction(kafka.bootstrap, topic, [b"aborted"], commit=False)
    assert sorted(read_committed(kafka.bootstrap, topic, 3)) == [b"c0", b"c1", b"c2"]
    assert all(n.metrics_url for n in kafka.nodes if "broker" in n.role)


def test_a_rule_on_broker_links_holds_the_markers(kafka: KafkaDockerHandle) -> None:
    assert kafka.fleet is not None
    topic = create_topic(kafka.bootstrap, partitions=2)
    rule = kafka.fleet.add_rule(
        {"kind": "delay", "link": BROKER_LINKS, "api": ["WriteTxnMarkers"], "ms": 6000}
    )
    transaction(kafka.bootstrap, topic, [b"a", b"b"])
    assert any(e.lso < e.high_watermark for e in list_ends(kafka.bootstrap, [topic]))
    wait_for(
        lambda: all(e.lso == e.high_watermark == 2 for e in list_ends(kafka.bootstrap, [topic])),
        "the delayed markers",
    )
    kafka.fleet.remove_rule(rule.id)


def test_a_killed_broker_container_restarts_with_its_data(kafka: KafkaDockerHandle) -> None:
    topic = create_topic(kafka.bootstrap, partitions=2)
    transaction(kafka.bootstrap, topic, [b"before-0", b"before-1"])
    # the markers written first: killed before, broker 2's partition would keep the
    # transaction open for good (KAFKA-20734, docs/findings/)
    wait_for(
        lambda: all(e.lso == e.high_watermark for e in list_ends(kafka.bootstrap, [topic])),
        "the markers",
    )
    kafka.kill(2)
    assert kafka._containers[2].status() == "exited"
    kafka.restart(2)
    transaction(kafka.bootstrap, topic, [b"after-0", b"after-1"])
    got = sorted(read_committed(kafka.bootstrap, topic, 4))
    assert got == [b"after-0", b"after-1", b"before-0", b"before-1"]
    faults = [
        json.loads(line) for line in (kafka.run_dir / "faults.jsonl").read_text().splitlines()
    ]
    assert {("kill", 2), ("restart", 2)} <= {
        (f["kind"], f["target"]["node"]) for f in faults if f["link"] is None
    }


@pytest.mark.nightly
def test_stop_removes_the_containers_and_networks(
    docker: Any, node_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    launcher = KafkaDockerLauncher(docker_host=docker.env.get("DOCKER_HOST"))
    handle = launcher.start(ClusterSpec(brokers=1, coordinators=0), tmp_path_factory.mktemp("k"))
    label = f"{LABEL_RUN}={handle.run_id}"
    client = _client()
    assert client.containers.list(all=True, filters={"label": label})
    handle.stop()
    assert client.containers.list(all=True, filters={"label": label}) == []
    assert client.networks.list(filters={"label": label}) == []
