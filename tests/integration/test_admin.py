"""confluent-kafka's AdminClient against real nodes: topics, configs, cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

pytestmark = pytest.mark.integration


def _create(admin: AdminClient, *topics: NewTopic) -> dict[str, Exception | None]:
    out: dict[str, Exception | None] = {}
    for name, future in admin.create_topics(list(topics), operation_timeout=30).items():
        try:
            future.result(30)
            out[name] = None
        except KafkaException as exc:
            out[name] = exc
    return out


def test_create_list_delete_topics(bootstrap: str, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert _create(admin, NewTopic(topic_name, 4, 1)) == {topic_name: None}

    metadata = admin.list_topics(timeout=10)
    assert topic_name in metadata.topics
    partitions = metadata.topics[topic_name].partitions
    assert sorted(partitions) == [0, 1, 2, 3]
    # Two brokers: partitions are spread over both.
    assert {p.leader for p in partitions.values()} == set(metadata.brokers)

    again = _create(admin, NewTopic(topic_name, 1, 1))
    assert "TOPIC_ALREADY_EXISTS" in str(again[topic_name])

    for future in admin.delete_topics([topic_name], operation_timeout=30).values():
        future.result(30)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_topic_ids_are_stable(bootstrap: str, topic_name: str) -> None:
    from confluent_kafka import TopicCollection

    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic(topic_name, 2, 1))
    first = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(10)
    second = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(10)
    assert str(first.topic_id) == str(second.topic_id)
    assert str(first.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"


def test_invalid_topics_get_kafka_errors(bootstrap: str, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    results = _create(
        admin,
        NewTopic("bad/name", 1, 1),
        NewTopic(topic_name + "-rf3", 1, 3),
        NewTopic(topic_name + "-zero", 0, 1),
        NewTopic(topic_name + "-cfg", 1, 1, config={"no.such.config": "1"}),
    )

    def code(exc: Exception | None) -> int:
        assert isinstance(exc, KafkaException), exc
        return exc.args[0].code()

    assert code(results["bad/name"]) == KafkaError.TOPIC_EXCEPTION  # 17
    assert code(results[topic_name + "-rf3"]) == KafkaError.INVALID_REPLICATION_FACTOR
    assert code(results[topic_name + "-zero"]) == KafkaError.INVALID_PARTITIONS
    assert code(results[topic_name + "-cfg"]) == KafkaError.INVALID_CONFIG


def test_describe_configs_and_cluster(bootstrap: str, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, NewTopic(topic_name, 1, 1, config={"retention.ms": "123456"}))
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "123456"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"

    cluster = admin.describe_cluster().result(10)
    assert len(cluster.nodes) == 2
    assert cluster.cluster_id
    assert cluster.controller is not None
