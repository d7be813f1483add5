"""Issue 35 item 2: one topic config must not break the cluster. CreateTopics with a
value Kafka's LogConfig refuses gets INVALID_CONFIG with the reason, and a bad value
already stored (by a node before this check) never stops a broker from starting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import start_cluster
from txnchaos.harness.launch.local import LocalCluster

from .support import INVALID_CONFIG, controller_client, create_topic, produce_to_leader

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("topic-configs"), brokers=2, coordinators=1)
    yield c
    c.down()


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("segment.ms", "0", "Value must be at least 1"),
        ("segment.ms", "-5", "Value must be at least 1"),
        ("segment.bytes", "1", "Value must be at least 1048576"),
        ("segment.bytes", "3000000000", "Not a number of type INT"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("max.message.bytes", "x", "Not a number of type INT"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
    ],
)
def test_invalid_topic_config_is_refused(
    cluster: LocalCluster, name: str, value: str, reason: str
) -> None:
    admin = controller_client(cluster)
    try:
        topic = f"bad-{name.replace('.', '-')}-{value.strip('-')}"
        result = create_topic(admin, topic, {name: value}, partitions=2)
        assert result.error_code == INVALID_CONFIG, result
        assert result.error_message == f"Invalid value {value} for configuration {name}: {reason}"
        # the cluster still creates and serves topics
        ok = create_topic(admin, topic + "-ok", partitions=2)
        assert ok.error_code == 0, ok
        for p in (0, 1):
            assert produce_to_leader(cluster, topic + "-ok", p).error_code == 0
    finally:
        admin.close()


def test_stored_invalid_config_does_not_stop_a_broker(tmp_path: Path) -> None:
    c = start_cluster(tmp_path / "c", brokers=1, coordinators=1)
    try:
        admin = controller_client(c)
        assert create_topic(admin, "stored", partitions=2).error_code == 0
        admin.close()
        c.down()
        state_file = next(tmp_path.glob("c/node-*/controller/controller.json"))
        doc = json.loads(state_file.read_text())
        for t in doc["topics"]:
            t["configs"] = {"segment.ms": "0", "segment.bytes": "1"}
        state_file.write_text(json.dumps(doc))
        c.up()  # raised before: every broker crashed opening the partitions
        for p in (0, 1):
            assert produce_to_leader(c, "stored", p).error_code == 0
    finally:
        c.down()
