"""A workload topic's ``configs`` go with its CreateTopics: the cluster stores what it takes
and refuses what it does not, with its reason (the project's nodes check topic settings as
Apache Kafka 4 does)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from txnchaos.harness.workload.config import TopicSpec
from txnchaos.harness.workload.topics import TopicSetupError, ensure_topics


def described(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in entries.items()}


def test_a_topics_configs_reach_the_cluster(wl_bootstrap: str, uniq: str) -> None:
    topic = f"configured-{uniq}"
    ensure_topics(
        wl_bootstrap, [TopicSpec(name=topic, partitions=1, configs={"retention.ms": "600000"})]
    )
    assert described(wl_bootstrap, topic)["retention.ms"] == "600000"


def test_a_config_the_cluster_refuses_fails_the_setup_with_its_reason(
    wl_bootstrap: str, uniq: str
) -> None:
    with pytest.raises(TopicSetupError, match=r"segment\.bytes"):
        ensure_topics(
            wl_bootstrap,
            [TopicSpec(name=f"refused-{uniq}", partitions=1, configs={"segment.bytes": "2048"})],
        )


def test_numbers_and_booleans_in_a_topics_configs_are_written_as_kafka_writes_them() -> None:
    from txnchaos.harness.workload.config import WorkloadConfigError, load_workload

    topic = {"name": "t", "partitions": 1, "configs": {"retention.ms": 600000, "x": True}}
    workload = load_workload({"topics": [topic], "users": []})
    assert workload.topics[0].configs == {"retention.ms": "600000", "x": "true"}
    with pytest.raises(WorkloadConfigError, match=r"topics\.0\.configs\.y"):
        load_workload({"topics": [{**topic, "configs": {"y": [1]}}], "users": []})
