"""Each node serves Prometheus text on its own port."""

from __future__ import annotations

import urllib.request

import pytest
from confluent_kafka import Producer

from txnchaos.harness.launch.local import LocalCluster

from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_metrics_count_requests_and_offsets(
    shared_cluster: LocalCluster, bootstrap: str, topic_name: str
) -> None:
    create_topic(bootstrap, topic_name, 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic_name, value=b"m", partition=i % 2)
    assert producer.flush(10) == 0
    texts = [scrape(n["metrics_port"]) for n in shared_cluster.state()["nodes"]]
    joined = "\n".join(texts)
    assert 'txnchaos_requests_total{api="produce"}' in joined
    assert 'txnchaos_requests_total{api="metadata"}' in joined
    assert "txnchaos_bytes_in_total" in joined
    offsets = [
        float(line.rsplit(" ", 1)[1])
        for line in joined.splitlines()
        if line.startswith("kafka_log_log_end_offset{") and f'topic="{topic_name}"' in line
    ]
    assert sorted(offsets) == [5.0, 5.0]
