"""The external launcher against a cluster it did not start (the session's shared local
cluster, tests/conftest.py, treated as external): client-side proxies with address
rewriting, proxy faults, no node faults."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from txnchaos.harness.launch.base import ClusterSpec, LaunchError, UnsupportedFault
from txnchaos.harness.launch.external import ExternalHandle, ExternalLauncher
from txnchaos.harness.launch.registry import get_launcher
from txnchaos.rundir.fault_log import read_fault_log

from .helpers import StatsConsumer, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def external(bootstrap: str, tmp_path: Path) -> Iterator[ExternalHandle]:
    launcher = get_launcher("external", bootstrap=bootstrap, metrics={1: "http://m:1/metrics"})
    handle = launcher.start(ClusterSpec(seed=5), tmp_path / "run")
    assert isinstance(handle, ExternalHandle)
    yield handle
    handle.stop()


def test_external_cluster_behind_proxies(external: ExternalHandle, bootstrap: str) -> None:
    direct = set(bootstrap.split(","))
    # The launcher listed the brokers at start: each has its own proxy already.
    nodes = external.nodes
    assert {n.id for n in nodes} == {1, 2}
    assert {f"{n.host}:{n.port}" for n in nodes} == direct
    assert {"client->bootstrap0", "client->bootstrap1", "client->node1", "client->node2"} <= set(
        external.links
    )
    assert external.fleet is not None
    proxies = {link.bootstrap for link in external.fleet.fleet.links.values()}
    assert {n.advertised for n in nodes} <= proxies
    assert set(external.bootstrap.split(",")) <= proxies and not direct & proxies

    topic = create_topic(external.bootstrap, partitions=2)
    producer = Producer({"bootstrap.servers": external.bootstrap})
    told = {f"{b.host}:{b.port}" for b in producer.list_topics(timeout=30).brokers.values()}
    assert told <= proxies
    produce(external.bootstrap, topic, [b"p%d" % i for i in range(50)])

    rule = external.fleet.add_rule(
        {"kind": "delay", "link": "client->node*", "api": "Produce", "ms": 100}
    )
    try:
        produce(external.bootstrap, topic, [b"q%d" % i for i in range(5)], {"linger.ms": 0})
    finally:
        external.fleet.remove_rule(rule.id)
    delays = [e for e in read_fault_log(external.fault_log().path) if e["kind"] == "delay"]
    assert delays and all(e["target"]["api"] == "Produce" for e in delays)
    assert {e["link"] for e in delays} <= {"client->node1", "client->node2"}

    consumer = StatsConsumer(external.bootstrap, topic)
    try:
        values = consumer.read_until(55)
        consumer.poll_for(0.5)
    finally:
        consumer.close()
    assert set(values) == {b"p%d" % i for i in range(50)} | {b"q%d" % i for i in range(5)}
    assert consumer.connected and consumer.connected <= proxies


def test_external_has_no_node_faults(external: ExternalHandle) -> None:
    assert external.capabilities == frozenset()
    for fault in (external.kill, external.pause, external.resume, external.restart):
        with pytest.raises(UnsupportedFault, match="external launcher cannot"):
            fault(1)
    with pytest.raises(UnsupportedFault):
        external.disconnect(1)
    assert external.metrics_urls() == {1: "http://m:1/metrics"}
    doc = json.loads(json.dumps(external.describe()))
    assert doc["launcher"] == "external" and doc["capabilities"] == []
    assert doc["flavour"] == "external" and doc["version"] is None
    assert doc["upstream_bootstrap"] and doc["links"]
    external.stop()
    assert {n.id for n in external.nodes} == {1, 2}  # still described after the stop
    assert external.links == [] and external.describe()["links"] == {}


def test_unreachable_bootstrap_is_a_launch_error(tmp_path: Path) -> None:
    with socket.socket() as sock:  # bound, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(LaunchError, match="no bootstrap server answers"):
            ExternalLauncher(bootstrap=f"127.0.0.1:{port}").start(ClusterSpec(), tmp_path)


def test_cpus_are_refused_before_anything_is_contacted(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="the external launcher starts none"):
        ExternalLauncher(bootstrap="127.0.0.1:1").start(ClusterSpec(cpus="0"), tmp_path)
