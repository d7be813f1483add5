"""Each node serves Prometheus text on its own port."""

from __future__ import annotations

import time
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


def eventually(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def _value(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric == name and ",".join(sorted(rest.rstrip("}").split(","))) == want:
            return float(value)
    raise AssertionError(f"{name}{labels} not found")


def test_transaction_metrics_follow_an_open_transaction(
    shared_cluster: LocalCluster, bootstrap: str, topic_name: str
) -> None:
    create_topic(bootstrap, topic_name, 1)
    nodes = shared_cluster.state()["nodes"]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(topic_name, b"t", partition=0)
    assert producer.flush(30) == 0

    def lag() -> float:
        for n in nodes:
            try:
                return _value(
                    scrape(n["metrics_port"]),
                    "kafka_cluster_partition_laststableoffsetlag",
                    topic=topic_name,
                    partition="0",
                )
            except AssertionError:
                continue
        raise AssertionError("no node reports the partition")

    def committed() -> float:
        text = scrape(nodes[0]["metrics_port"])
        return _value(text, "kafka_coordinator_transaction_transactionscommitted_total")

    assert lag() == 3.0
    before = committed()
    producer.commit_transaction(30)
    # EndTxn is answered once PrepareCommit is logged; the markers (which move the LSO)
    # and CompleteCommit (which counts the commit) follow right after.
    eventually(lambda: lag() == 0.0)
    eventually(lambda: committed() == before + 1)
    text = "\n".join(scrape(n["metrics_port"]) for n in nodes)
    assert "kafka_server_replicamanager_produceridcount " in text
    assert "kafka_server_replicamanager_partitionswithlatetransactionscount 0.0" in text
    assert "transactionmarkerchannelmanager_unknowndestinationqueuesize 0.0" in text
    assert "txnchaos_transaction_markers_pending 0.0" in text
