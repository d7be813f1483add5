"""The docker launcher against a real Docker engine: the node image in containers on a
user-defined network, clients on the host, node faults through the engine.

Needs the engine of ``scripts/bootstrap.sh --docker``; without one these tests skip on a
developer machine and fail under CI=true (the ``docker`` fixture of tests/docker).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from txnchaos.harness.launch import docker as docker_launch
from txnchaos.harness.launch.base import ClusterSpec
from txnchaos.harness.launch.docker import LABEL_RUN, DockerHandle, DockerLauncher
from txnchaos.harness.launch.errors import LaunchError
from txnchaos.rundir.fault_log import read_fault_log

from .helpers import StatsConsumer, create_topic, metric, produce

# The first test may build the image (a cold build debootstraps the base: minutes).
pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

BROKER, CONTROLLER = 1, 1001


def _launcher(docker: Any, image: str) -> DockerLauncher:
    return DockerLauncher(image=image, docker_host=docker.env.get("DOCKER_HOST"))


@pytest.fixture(scope="module")
def cluster(
    docker: Any, node_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DockerHandle]:
    """One broker and one coordinator node (the controller), every link proxied."""
    run_dir = tmp_path_factory.mktemp("docker-proxied")
    spec = ClusterSpec(brokers=1, coordinators=1, seed=3)
    handle = _launcher(docker, node_image).start(spec, run_dir)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def topic(cluster: DockerHandle) -> str:
    name = create_topic(cluster.bootstrap)
    produce(cluster.bootstrap, name, [b"a%d" % i for i in range(50)])
    return name


def _status(handle: DockerHandle, node_id: int) -> str:
    return handle._nodes[node_id].status()


def test_produce_and_consume_from_the_host(cluster: DockerHandle, topic: str) -> None:
    assert cluster.fleet is not None
    links = cluster.fleet.fleet.links
    assert set(links) == {"client->n1", "client->n1001", "n1->n1001", "n1001->n1"}
    assert all(link.address[0] == cluster.gateway for link in links.values())
    client_side = {links["client->n1"].bootstrap, links["client->n1001"].bootstrap}
    told = Producer({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=30).brokers
    assert {f"{b.host}:{b.port}" for b in told.values()} == client_side
    consumer = StatsConsumer(cluster.bootstrap, topic)
    try:
        assert set(consumer.read_until(50)) == {b"a%d" % i for i in range(50)}
        consumer.poll_for(0.5)
    finally:
        consumer.close()
    assert consumer.connected and consumer.connected <= client_side
    # The broker container reaches the controller's container through the host proxy.
    assert links["n1->n1001"].stats.bytes_up > 0
    for node in cluster.nodes:
        assert node.container and node.port and node.metrics_url
        assert metric(node.metrics_url, "txnchaos_bytes_in_total") > 0


def test_pause_stalls_clients_and_resume_lets_them_continue(
    cluster: DockerHandle, topic: str
) -> None:
    consumer = StatsConsumer(cluster.bootstrap, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    try:
        assert len(consumer.read_until(50)) == 50
        cluster.pause(BROKER)
        assert _status(cluster, BROKER) == "paused"
        for i in range(5):
            producer.produce(topic, b"b%d" % i)
        assert producer.flush(1.0) > 0  # nothing can answer a frozen container
        assert consumer.poll_for(1.0) == []
        cluster.resume(BROKER)
        assert producer.flush(60) == 0
        assert set(consumer.read_until(5)) == {b"b%d" % i for i in range(5)}
    finally:
        if _status(cluster, BROKER) == "paused":
            cluster.resume(BROKER)
        consumer.close()


def test_restart_and_kill_keep_the_data(cluster: DockerHandle, topic: str) -> None:
    before = {n.id: n for n in cluster.nodes}
    cluster.restart(BROKER)
    assert _status(cluster, BROKER) == "running"
    after = {n.id: n for n in cluster.nodes}
    assert after[BROKER].container == before[BROKER].container  # the same container
    assert after[BROKER].advertised == before[BROKER].advertised  # the proxy's, stable
    produce(cluster.bootstrap, topic, [b"c%d" % i for i in range(5)])

    cluster.kill(BROKER)
    assert _status(cluster, BROKER) == "exited"
    assert cluster.node(BROKER).metrics_url is None  # nothing to scrape while it is down
    cluster.restart(BROKER)
    produce(cluster.bootstrap, topic, [b"d%d" % i for i in range(5)])
    # The restarted container's published metrics port (Docker picks a new one) is known.
    url = cluster.node(BROKER).metrics_url
    assert url is not None and metric(url, "txnchaos_bytes_in_total") > 0

    expected = {
        f"{p}{i}".encode() for p, n in (("a", 50), ("b", 5), ("c", 5), ("d", 5)) for i in range(n)
    }
    fresh = StatsConsumer(cluster.bootstrap, topic)  # a new group: from the beginning
    try:
        assert set(fresh.read_until(len(expected))) == expected
    finally:
        fresh.close()


def test_a_restart_that_gives_up_still_points_the_proxy_at_the_new_container(
    cluster: DockerHandle, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed broker restarted while the controller is paused cannot register, so the
    restart gives up; once the controller resumes, the broker serves on a new published
    port, which clients reach through the same proxy."""
    monkeypatch.setattr(docker_launch, "READY_TIMEOUT_S", 3.0)
    cluster.pause(CONTROLLER)
    try:
        cluster.kill(BROKER)
        with pytest.raises(LaunchError, match="did not serve"):
            cluster.restart(BROKER)
    finally:
        cluster.resume(CONTROLLER)
    produce(cluster.bootstrap, topic, [b"f%d" % i for i in range(5)])


def test_network_disconnect_and_reconnect(cluster: DockerHandle, topic: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    producer.list_topics(timeout=30)
    cluster.disconnect(BROKER)
    producer.produce(topic, b"e0")
    assert producer.flush(1.0) > 0
    cluster.reconnect(BROKER)
    assert producer.flush(60) == 0
    kinds = [e["kind"] for e in read_fault_log(cluster.run_dir) if e["link"] is None]
    assert kinds == ["pause", "restart", "kill", "restart", "kill", "pause", "disconnect"]


def test_unproxied_cluster_and_cleanup(docker: Any, node_image: str, tmp_path: Path) -> None:
    """Nodes reach each other by container name; clients still get the stable host-side
    proxy addresses; ``cpus`` places the containers and the nodes in them. Stopping removes
    every labelled container and the network."""
    cpu = max(os.sched_getaffinity(0))
    spec = ClusterSpec(brokers=1, coordinators=1, proxied=False, cpus=str(cpu))
    handle = _launcher(docker, node_image).start(spec, tmp_path / "run")
    try:
        assert handle.links == ["client->n1", "client->n1001"]
        for node in handle._nodes.values():  # placed: the cpuset, and the node inside it
            container = node.wrapped()
            container.reload()
            attrs = container.attrs
            assert attrs["HostConfig"]["CpusetCpus"] == str(cpu)
            pid = attrs["State"]["Pid"]
            assert os.sched_getaffinity(pid) == {cpu}
            assert os.sched_getscheduler(pid) == os.SCHED_BATCH
        topic = create_topic(handle.bootstrap)
        produce(handle.bootstrap, topic, [b"x%d" % i for i in range(10)])
        consumer = StatsConsumer(handle.bootstrap, topic)
        try:
            assert len(consumer.read_until(10)) == 10
        finally:
            consumer.close()
        doc = json.loads(json.dumps(handle.describe()))
        assert doc["launcher"] == "docker" and doc["network"].startswith("txnchaos-")
    finally:
        handle.stop()
    after = json.loads(json.dumps(handle.describe()))  # still describable after the stop
    assert after["bootstrap"] == doc["bootstrap"] and after["links"] == {}
    label = f"label={LABEL_RUN}={handle.run_id}"
    assert docker("ps", "-aq", "--filter", label).stdout.split() == []
    assert docker("network", "ls", "-q", "--filter", label).stdout.split() == []
    logs = (tmp_path / "run" / "cluster" / "node-1" / "node.log").read_text()
    assert "serving on 0.0.0.0:9092" in logs
