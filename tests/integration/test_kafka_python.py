"""kafka-python as a second, independent client: admin, produce, consume, groups."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")


def test_kafka_python_round_trip(bootstrap: str, topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])
        assert topic_name in admin.list_topics()
    finally:
        admin.close()

    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True
    )
    futures = [
        producer.send(topic_name, value=f"kp-{i}".encode(), partition=i % 2) for i in range(200)
    ]
    producer.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(100))

    consumer = KafkaConsumer(
        topic_name,
        bootstrap_servers=bootstrap.split(","),
        group_id=f"kp-{topic_name}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20000,
    )
    values = set()
    try:
        for msg in consumer:
            values.add(msg.value)
            if len(values) == 200:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert values == {f"kp-{i}".encode() for i in range(200)}
