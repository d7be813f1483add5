"""ListOffsets (earliest, latest, by timestamp) and DeleteRecords moving the log start."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration


def test_list_offsets_and_delete_records(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(100):
        producer.produce(topic_name, value=str(i).encode(), timestamp=1_000_000 + i * 1000)
        producer.flush(10)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic_name, 0)

    def offset_for(spec: OffsetSpec) -> int:
        return admin.list_offsets({tp: spec})[tp].result(10).offset

    assert offset_for(OffsetSpec.earliest()) == 0
    assert offset_for(OffsetSpec.latest()) == 100
    assert offset_for(OffsetSpec.for_timestamp(1_000_000 + 42_000)) == 42
    assert offset_for(OffsetSpec.for_timestamp(9_999_999_999)) == -1

    result = admin.delete_records([TopicPartition(topic_name, 0, 30)])
    deleted = result[TopicPartition(topic_name, 0, 30)].result(10)
    assert deleted.low_watermark == 30
    assert offset_for(OffsetSpec.earliest()) == 30
    assert offset_for(OffsetSpec.latest()) == 100
