"""kill -9 of the broker during produce, restart: every acknowledged record is still
there, at the offset it was acknowledged with, in order."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from txnchaos.harness.launch.local import LocalCluster

from .test_produce_consume import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_acknowledged_records_survive_kill_9(fresh_cluster: LocalCluster) -> None:
    bootstrap = fresh_cluster.state()["bootstrap"]
    topic = "crash"
    create_topic(bootstrap, topic, 2)
    acked: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()
    enough = threading.Event()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 120000,
            "reconnect.backoff.max.ms": 200,
        }
    )

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            with lock:
                acked[(msg.partition(), msg.offset())] = msg.value()
                if len(acked) >= 2000:
                    enough.set()

    stop = threading.Event()

    def produce_loop() -> None:
        # Delivery callbacks run inside poll(): keep polling until told to stop.
        i = 0
        while not stop.is_set():
            if i < 20000:
                try:
                    producer.produce(
                        topic, value=f"v{i}".encode(), partition=i % 2, on_delivery=on_delivery
                    )
                    i += 1
                except BufferError:
                    producer.poll(0.01)
                if i % 50 == 0:
                    producer.poll(0.001)
            else:
                producer.poll(0.05)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    assert enough.wait(60), "the producer never got 2000 acknowledgements"
    fresh_cluster.kill_node(1)
    fresh_cluster.restart_node(1)
    stop.set()
    thread.join()
    assert producer.flush(120) == 0

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "crash-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    found: dict[tuple[int, int], bytes] = {}
    idle = 0
    try:
        while idle < 20:
            batch = consumer.consume(1000, timeout=0.5)
            idle = 0 if batch else idle + 1
            for msg in batch:
                assert msg.error() is None
                found[(msg.partition(), msg.offset())] = msg.value()
    finally:
        consumer.close()
    missing = {k: v for k, v in acked.items() if found.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records lost or changed"
    # Each value appears once: the idempotent retry after the restart wrote no copies.
    assert len(set(found.values())) == len(found)
    for p in range(2):
        offsets = sorted(o for (q, o) in found if q == p)
        assert offsets == list(range(len(offsets)))
