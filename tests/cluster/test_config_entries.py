"""DescribeConfigs' entries as Apache Kafka 4.4 builds them (cluster/cluster_info/
config_entries.py): sources, synonyms, types, read-only and sensitive flags, checked
against what Kafka 4.4.0 answered for the same configs (docs/conformance.md)."""

from __future__ import annotations

from txnchaos.cluster.cluster_info.config_entries import broker_entry, topic_entry
from txnchaos.cluster.controller.topic_config import effective_topic_configs
from txnchaos.cluster.settings import SPECS, NodeSettings

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="node" password="pw" user_node="pw";'
)


def topic(name: str, overrides: dict[str, str], settings: NodeSettings, **kw: bool) -> dict:
    value, _ = effective_topic_configs(overrides, settings)[name]
    flags = {"include_synonyms": True, "include_documentation": False} | kw
    return topic_entry(name, value, overrides, settings, **flags)


def broker(name: str, settings: NodeSettings, **kw: bool) -> dict:
    flags = {"include_synonyms": True, "include_documentation": False} | kw
    return broker_entry(name, settings, **flags)


def test_a_topic_override_comes_first_then_the_brokers_default() -> None:
    settings = NodeSettings()
    e = topic("retention.bytes", {"retention.bytes": "1000"}, settings)
    assert (e["value"], e["config_source"], e["read_only"]) == ("1000", 1, False)
    assert e["synonyms"] == [
        {"name": "retention.bytes", "value": "1000", "source": 1},
        {"name": "log.retention.bytes", "value": "-1", "source": 5},
    ]
    assert e["config_type"] == 5  # LONG


def test_topic_configs_are_never_read_only_and_typed_as_kafkas() -> None:
    settings = NodeSettings()
    types = {}
    for name in effective_topic_configs({}, settings):
        e = topic(name, {}, settings)
        assert e["read_only"] is False, name
        assert e["is_sensitive"] is False, name
        types[name] = e["config_type"]
    # Kafka 4.4.0's answer: LIST 7, LONG 5, INT 3, STRING 2
    assert types == {
        "cleanup.policy": 7,
        "retention.ms": 5,
        "retention.bytes": 5,
        "segment.bytes": 3,
        "segment.ms": 5,
        "index.interval.bytes": 3,
        "max.message.bytes": 3,
        "message.timestamp.type": 2,
        "message.timestamp.before.max.ms": 5,
        "message.timestamp.after.max.ms": 5,
        "min.insync.replicas": 3,
        "compression.type": 2,
    }


def test_a_broker_setting_given_to_the_node_is_a_static_broker_config() -> None:
    """Given, even at its default's value, a setting is STATIC_BROKER_CONFIG (4), with
    the default after it; the topic configs it stands in for take that source."""
    settings = NodeSettings({"log.segment.bytes": "1048576", "message.max.bytes": "1048588"})
    seg = topic("segment.bytes", {}, settings)
    assert (seg["value"], seg["config_source"]) == ("1048576", 4)
    assert seg["synonyms"] == [
        {"name": "log.segment.bytes", "value": "1048576", "source": 4},
        {"name": "log.segment.bytes", "value": "1073741824", "source": 5},
    ]
    assert topic("max.message.bytes", {}, settings)["config_source"] == 4
    assert topic("index.interval.bytes", {}, settings)["config_source"] == 5
    b = broker("message.max.bytes", settings)
    assert (b["value"], b["config_source"], b["read_only"]) == ("1048588", 4, False)


def test_a_config_whose_kafka_default_is_null_has_no_default_synonym() -> None:
    """Kafka has no default for log.retention.ms and log.roll.ms (they come from
    log.retention.hours and log.roll.hours): unset, the broker config's value is null and
    the topic's retention.ms / segment.ms have no synonym."""
    settings = NodeSettings()
    for name in ("retention.ms", "segment.ms"):
        e = topic(name, {}, settings)
        assert (e["value"], e["config_source"], e["synonyms"]) == ("604800000", 5, []), name
    b = broker("log.retention.ms", settings)
    assert (b["value"], b["config_source"], b["synonyms"], b["read_only"]) == (None, 5, [], False)
    given = NodeSettings({"log.retention.ms": "60000"})
    assert broker("log.retention.ms", given)["synonyms"] == [
        {"name": "log.retention.ms", "value": "60000", "source": 4},
        {"name": "log.retention.hours", "value": "168", "source": 5},  # Kafka's fallback
    ]
    assert topic("retention.ms", {}, given)["config_source"] == 4


def test_a_topic_config_the_node_fixes_names_kafkas_broker_config() -> None:
    settings = NodeSettings()
    assert topic("cleanup.policy", {}, settings)["synonyms"] == [
        {"name": "log.cleanup.policy", "value": "delete", "source": 5}
    ]
    assert topic("compression.type", {"compression.type": "producer"}, settings)["synonyms"] == [
        {"name": "compression.type", "value": "producer", "source": 1},
        {"name": "compression.type", "value": "producer", "source": 5},
    ]


def test_a_password_is_sensitive_and_never_shown() -> None:
    settings = NodeSettings({"sasl.jaas.config": JAAS})
    e = broker("sasl.jaas.config", settings)
    assert (e["value"], e["is_sensitive"], e["config_type"], e["config_source"]) == (
        None,
        True,
        9,
        4,
    )
    assert e["synonyms"] == [{"name": "sasl.jaas.config", "value": None, "source": 4}]
    assert "pw" not in repr(e)


def test_broker_read_only_is_kafkas_dynamic_set() -> None:
    """Static broker configs are read-only unless Kafka can alter them while it runs."""
    settings = NodeSettings({"num.partitions": "3"})
    e = broker("num.partitions", settings)
    assert (e["read_only"], e["config_source"], e["config_type"]) == (True, 4, 3)
    for name in ("log.segment.bytes", "max.connections", "min.insync.replicas"):
        assert broker(name, settings)["read_only"] is False, name
    for name in ("transaction.max.timeout.ms", "txnchaos.transaction.concurrent.wait.ms"):
        assert broker(name, settings)["read_only"] is True, name
    assert broker("connections.max.idle.ms", settings)["config_type"] == 5  # LONG
    assert broker("auto.create.topics.enable", settings)["config_type"] == 1  # BOOLEAN


def test_synonyms_and_documentation_only_when_asked() -> None:
    settings = NodeSettings()
    e = broker("num.partitions", settings, include_synonyms=False)
    assert e["synonyms"] == [] and e["documentation"] is None
    assert e["config_source"] == 5
    d = broker("num.partitions", settings, include_documentation=True)
    assert d["documentation"] == SPECS["num.partitions"].doc
    t = topic("segment.bytes", {}, settings, include_documentation=True)
    assert t["documentation"]
