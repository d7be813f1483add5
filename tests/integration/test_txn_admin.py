"""KIP-664 tooling with kafka-python's admin client against real nodes:
DescribeProducers, ListTransactions and DescribeTransactions see an open transaction
on both sides (partition and coordinator)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration
kafka = pytest.importorskip("kafka")


def test_open_transaction_is_visible_to_the_tools(bootstrap: str, topic_name: str) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    create_topic(bootstrap, topic_name, 2)
    txn_id = f"admin-{topic_name}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"open", partition=1)
    assert producer.flush(30) == 0

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        listed = admin.list_transactions()  # node id -> what that coordinator lists
        ours = [t for ts in listed.values() for t in ts if t.transactional_id == txn_id]
        assert len(ours) == 1 and ours[0].state == "Ongoing"

        described = admin.describe_transactions([txn_id])[txn_id]
        assert described.state == "Ongoing"
        assert {(tp.topic, tp.partition) for tp in described.topic_partitions} == {(topic_name, 1)}
        pid = described.producer_id

        producers = admin.describe_producers([TopicPartition(topic_name, 1)])
        state = producers[TopicPartition(topic_name, 1)]
        active = {p.producer_id: p for p in state.active_producers}
        assert active[pid].current_transaction_start_offset == 0

        producer.commit_transaction(30)
        # The coordinator answers EndTxn once PrepareCommit is durable; the marker that
        # closes the partition's transaction follows (as in Kafka): wait for it.
        for _ in range(200):  # bounded (~20 s), normally one or two rounds
            after = admin.describe_producers([TopicPartition(topic_name, 1)])
            tp_state = after[TopicPartition(topic_name, 1)]
            active = {p.producer_id: p for p in tp_state.active_producers}
            if active[pid].current_transaction_start_offset == -1:
                break
            time.sleep(0.1)
        assert active[pid].current_transaction_start_offset == -1
        assert admin.describe_transactions([txn_id])[txn_id].state == "CompleteCommit"
    finally:
        admin.close()
