"""Idempotent produce at the protocol level: a retried batch gets its original
offsets, a sequence gap is rejected, and nothing is written twice."""

from __future__ import annotations

import pytest

from txnchaos.cluster.protocol.records import encode_batch

from .raw_client import RawClient, address
from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
CORRUPT_MESSAGE = 2


def test_retried_batch_returns_original_offset(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, 1)
    from confluent_kafka.admin import AdminClient

    leader = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    broker = leader.brokers[leader.topics[topic_name].partitions[0].leader]
    client = RawClient(broker.host, broker.port)
    try:
        pid, epoch = client.init_producer_id()
        first = encode_batch(
            [b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0
        )
        r1 = client.produce(topic_name, 0, first)
        assert r1.error_code == 0
        r2 = client.produce(topic_name, 0, first)  # the retry of the same batch
        assert r2.error_code == 0
        assert r2.base_offset == r1.base_offset
        assert client.latest_offset(topic_name, 0) == r1.base_offset + 3

        gap = encode_batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
        r3 = client.produce(topic_name, 0, gap)
        assert r3.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER

        nxt = encode_batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=3)
        r4 = client.produce(topic_name, 0, nxt)
        assert r4.error_code == 0 and r4.base_offset == r1.base_offset + 3

        corrupt = bytearray(
            encode_batch([b"e"], producer_id=pid, producer_epoch=epoch, base_sequence=4)
        )
        corrupt[-1] ^= 0xFF
        r5 = client.produce(topic_name, 0, bytes(corrupt))
        assert r5.error_code == CORRUPT_MESSAGE
        assert client.latest_offset(topic_name, 0) == r1.base_offset + 4
    finally:
        client.close()


def test_producer_ids_are_unique(bootstrap: str) -> None:
    host, port = address(bootstrap)
    client = RawClient(host, port)
    try:
        ids = {client.init_producer_id()[0] for _ in range(50)}
    finally:
        client.close()
    assert len(ids) == 50
