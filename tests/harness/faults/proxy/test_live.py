"""The proxy in front of real nodes, driven by real confluent-kafka clients.

The fleet runs on its own loop thread (:class:`FleetThread`); the cluster is the
session's shared two-broker cluster (tests/conftest.py), reached in external mode:
clients bootstrap to a proxy, and rewritten Metadata/FindCoordinator answers lead
them to one proxy per broker.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from txnchaos.harness.faults.proxy.thread import FleetThread
from txnchaos.rundir.fault_log import read_fault_log

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def live_bootstrap(request: pytest.FixtureRequest) -> str:
    try:
        return request.getfixturevalue("bootstrap")
    except Exception as exc:  # the node is still being assembled: say so, do not hide it
        pytest.skip(f"no live cluster: {exc.__class__.__name__}: {exc}")


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[FleetThread]:
    with FleetThread(fault_log=tmp_path, seed=1) as f:
        yield f


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"px-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(30)
    return name


def _read(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    out.append(msg.value())
        # a little longer, to see duplicates if there were any
        end = time.monotonic() + 2
        while time.monotonic() < end:
            out.extend(m.value() for m in consumer.consume(100, 0.2) if m.error() is None)
    finally:
        consumer.close()
    return out


def test_clients_only_reach_proxies(live_bootstrap: str, fleet: FleetThread) -> None:
    ext = fleet.external(live_bootstrap.split(","))
    topic = _topic(live_bootstrap, partitions=4)
    producer = Producer({"bootstrap.servers": ext.bootstrap_servers, "enable.idempotence": True})
    md = producer.list_topics(timeout=30)
    proxy_addrs = {(link.address[0], link.address[1]) for link in ext.links()}
    assert {(b.host, b.port) for b in md.brokers.values()} <= proxy_addrs
    for i in range(200):
        producer.produce(topic, f"v{i}".encode(), partition=i % 4)
    assert producer.flush(60) == 0
    assert len(_read(ext.bootstrap_servers, topic, 200)) == 200
    broker_links = list(ext.broker_links.values())
    assert len(broker_links) == 2
    assert all(link.stats.connections_total >= 1 for link in broker_links)
    assert sum(link.stats.rewrites for link in ext.links()) > 0


def test_delay_on_produce_shows_in_latency(live_bootstrap: str, fleet: FleetThread) -> None:
    ext = fleet.external(live_bootstrap.split(","))
    topic = _topic(live_bootstrap)
    producer = Producer({"bootstrap.servers": ext.bootstrap_servers, "linger.ms": 0})
    producer.list_topics(timeout=30)

    def one() -> float:
        t0 = time.monotonic()
        producer.produce(topic, b"x")
        assert producer.flush(30) == 0
        return time.monotonic() - t0

    one()
    fleet.add_rule({"kind": "delay", "api": "Produce", "ms": 500})
    assert one() >= 0.5
    fleet.heal_all()
    assert any(e["kind"] == "delay" for e in read_fault_log(fleet.fleet.fault_log.path))


def test_drop_metadata_response_is_retried(live_bootstrap: str, fleet: FleetThread) -> None:
    ext = fleet.external(live_bootstrap.split(","))
    fleet.add_rule({"kind": "drop_response", "api": "Metadata", "nth": 1})
    producer = Producer({"bootstrap.servers": ext.bootstrap_servers, "socket.timeout.ms": 2000})
    md = producer.list_topics(timeout=30)  # the first answer is swallowed; the retry gets one
    assert md.brokers
    kinds = [e["kind"] for e in read_fault_log(fleet.fleet.fault_log.path)]
    assert kinds.count("drop_response") == 1


def test_duplicate_produce_keeps_one_copy(live_bootstrap: str, fleet: FleetThread) -> None:
    ext = fleet.external(live_bootstrap.split(","))
    topic = _topic(live_bootstrap)
    fleet.add_rule({"kind": "duplicate", "api": "Produce"})
    producer = Producer({"bootstrap.servers": ext.bootstrap_servers, "enable.idempotence": True})
    for i in range(50):
        producer.produce(topic, f"d{i}".encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    fleet.heal_all()
    values = _read(live_bootstrap, topic, 50)
    assert sorted(values) == sorted(f"d{i}".encode() for i in range(50))
    dups = [e for e in read_fault_log(fleet.fleet.fault_log.path) if e["kind"] == "duplicate"]
    assert dups
