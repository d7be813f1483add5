"""A partition's log config comes from the broker's settings and the topic's overrides, by
Kafka's names (``log.index.interval.bytes`` / ``index.interval.bytes``...)."""

from __future__ import annotations

import pytest

from txnchaos.cluster.broker.partition_manager import log_config_for
from txnchaos.cluster.settings import NodeSettings, SettingsError


def test_index_interval_from_the_broker_setting_and_the_topic_override() -> None:
    assert log_config_for({}, NodeSettings()).index_interval_bytes == 4096
    settings = NodeSettings({"log.index.interval.bytes": "256"})
    assert log_config_for({}, settings).index_interval_bytes == 256
    topic = log_config_for({"index.interval.bytes": "128"}, settings, "t")
    assert topic.index_interval_bytes == 128


def test_a_negative_index_interval_is_refused() -> None:
    with pytest.raises(SettingsError, match=r"log\.index\.interval\.bytes"):
        NodeSettings({"log.index.interval.bytes": "-1"})
