"""Client helpers shared by the launcher tests (real confluent-kafka clients)."""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

WAIT_S = 60.0


def create_topic(bootstrap: str, partitions: int = 1, name: str | None = None) -> str:
    name = name or f"l-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(WAIT_S)
    return name


def produce(
    bootstrap: str, topic: str, values: list[bytes], conf: dict[str, Any] | None = None
) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, **(conf or {})}
    )
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(WAIT_S) == 0


class StatsConsumer:
    """A consumer that also records which broker addresses librdkafka connected to."""

    def __init__(self, bootstrap: str, topic: str, group: str | None = None) -> None:
        self.connected: set[str] = set()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "isolation.level": "read_committed",
                "statistics.interval.ms": 200,
                "stats_cb": self._stats,
            }
        )
        self.consumer.subscribe([topic])
        self.values: list[bytes] = []

    def _stats(self, doc: str) -> None:
        for broker in json.loads(doc).get("brokers", {}).values():
            if broker.get("state") == "UP" and broker.get("nodeid", -1) >= 0:
                self.connected.add(broker["nodename"])

    def poll_for(self, seconds: float) -> list[bytes]:
        """Everything that arrives within ``seconds``."""
        got: list[bytes] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in self.consumer.consume(100, 0.2):
                if msg.error() is None:
                    got.append(msg.value())
        self.values += got
        return got

    def read_until(self, count: int, timeout: float = WAIT_S) -> list[bytes]:
        """Until ``count`` more records arrived (bounded by ``timeout``)."""
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for msg in self.consumer.consume(100, 0.2):
                if msg.error() is None:
                    got.append(msg.value())
        self.values += got
        return got

    def close(self) -> None:
        self.consumer.close()


def metric(url: str, name: str) -> float:
    """The sum of every sample of ``name`` on a Prometheus text endpoint."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", line)
        if m:
            total += float(m.group(1))
    return total


def wait_for(predicate: Any, timeout: float = WAIT_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)
