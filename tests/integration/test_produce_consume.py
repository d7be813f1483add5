"""Idempotent confluent-kafka producers with every compression codec, read back."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def read_all(bootstrap: str, topic: str, expected: int, **extra: object) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )
    consumer.subscribe([topic])
    out = []
    idle = 0
    try:
        while len(out) < expected and idle < 40:
            batch = consumer.consume(num_messages=1000, timeout=0.5)
            idle = 0 if batch else idle + 1
            for msg in batch:
                assert msg.error() is None, msg.error()
                out.append(msg)
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_produce_every_codec(bootstrap: str, topic_name: str, codec: str) -> None:
    create_topic(bootstrap, topic_name, 3)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 10,
        }
    )
    acked: dict[int, list[tuple[int, bytes]]] = {}
    errors = []

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err:
            errors.append(err)
        else:
            acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))

    n = 3000
    for i in range(n):
        producer.produce(
            topic_name, value=f"{codec}-{i}".encode() * 3, partition=i % 3, on_delivery=on_delivery
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    assert sum(len(v) for v in acked.values()) == n
    for values in acked.values():
        offsets = [o for o, _ in values]
        assert offsets == list(range(len(offsets))), "offsets are dense and in send order"

    got = read_all(bootstrap, topic_name, n)
    assert len(got) == n
    by_partition: dict[int, list[tuple[int, bytes]]] = {}
    for msg in got:
        by_partition.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))
    assert by_partition == acked
