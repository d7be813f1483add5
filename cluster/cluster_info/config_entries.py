"""DescribeConfigs' entries as Apache Kafka 4.4 builds them (its broker's ``ConfigHelper``):
each config's source, synonyms, type, read-only and sensitive flags, for a topic and for
a broker.

Kafka's rules, which these functions follow:

* A config's **synonyms** are where its value could come from, most specific first: a
  topic's own override (TOPIC_CONFIG), then the broker config standing in for it (the
  topic config's broker name: ``retention.bytes`` has ``log.retention.bytes``) as a
  dynamic broker config, a cluster-wide dynamic default, a static broker config (the
  node's properties: here, a setting given with ``--set`` or a scenario's ``settings``,
  even at its default's value) and, last, the config's default (DEFAULT_CONFIG), listed
  only when the default is not null. The entry's **source** is the first synonym's, or
  DEFAULT_CONFIG when there is none; the synonyms are sent only when the request asks
  (``include_synonyms``).
* A topic config is never **read-only** (every one can be altered); a broker config is
  read-only unless Kafka can change it without a restart (its dynamic broker configs).
* A PASSWORD config is **sensitive**: its value, and every synonym's, is null.
* The **type** is Kafka's ``ConfigDef`` type of the config.

The project's nodes have no dynamic configs (no AlterConfigs), so the dynamic sources
never occur here. Settings of the project's own (``txnchaos.*``, ``transaction.version``,
...) are listed as broker configs with the same rules: read-only, typed by their value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..controller.topic_config import FIXED_DEFAULTS, TOPIC_CONFIG_KEYS
from ..settings import SPECS, NodeSettings, render_setting

# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigsResponse.ConfigType
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST, TYPE_PASSWORD = 1, 2, 3, 5, 7, 9

#: broker settings whose Kafka type is not what their value's type says (bool: BOOLEAN,
#: int: INT, str: STRING), measured on Kafka 4.4.0
BROKER_TYPES: dict[str, int] = {
    "connections.max.idle.ms": TYPE_LONG,
    "log.message.timestamp.after.max.ms": TYPE_LONG,
    "log.message.timestamp.before.max.ms": TYPE_LONG,
    "log.retention.bytes": TYPE_LONG,
    "log.retention.check.interval.ms": TYPE_LONG,
    "log.retention.ms": TYPE_LONG,
    "log.roll.ms": TYPE_LONG,
    "queued.max.request.bytes": TYPE_LONG,
    "sasl.enabled.mechanisms": TYPE_LIST,
    "sasl.jaas.config": TYPE_PASSWORD,
}
_KIND_TYPES = {bool: TYPE_BOOLEAN, int: TYPE_INT, str: TYPE_STRING}

#: broker settings Kafka can change while it runs (``DynamicBrokerConfig``'s), so not
#: read-only in its answer; every other broker config is
KAFKA_DYNAMIC_BROKER_CONFIGS = frozenset(
    {
        "log.index.interval.bytes",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "max.connections",
        "max.connections.per.ip",
        "message.max.bytes",
        "min.insync.replicas",
        "producer.id.expiration.ms",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.mechanism.inter.broker.protocol",
        "transaction.partition.verification.enable",
    }
)

#: broker settings with no default in Kafka (null): unset, their value is null and they
#: have no DEFAULT_CONFIG synonym. Kafka derives log.retention.ms from log.retention.hours
#: (168) and log.roll.ms from log.roll.hours (168), which the project's nodes do not have:
#: their defaults stand in for those
NULL_DEFAULTS = frozenset({"log.retention.ms", "log.roll.ms", "sasl.jaas.config"})
#: the hours setting Kafka falls back on for these (a synonym: DEFAULT_CONFIG, 168). Kafka
#: lists it after the milliseconds setting only when that is set: unset, the synonyms
#: start at the first of the config's own name, so there are none
HOURS_SYNONYMS = {"log.retention.ms": "log.retention.hours", "log.roll.ms": "log.roll.hours"}

#: a topic config's broker config (Kafka's ServerTopicConfigSynonyms) where the node has
#: no setting of that name: the topic config's fixed default is that config's default
FIXED_BROKER_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "message.timestamp.type": "log.message.timestamp.type",
    "compression.type": "compression.type",
}

#: topic configs whose Kafka type is not their checked kind's
TOPIC_TYPES = {"cleanup.policy": TYPE_LIST}
_TOPIC_KIND_TYPES = {"INT": TYPE_INT, "LONG": TYPE_LONG, "STRING": TYPE_STRING}


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source}


def broker_type(name: str) -> int:
    return BROKER_TYPES.get(name) or _KIND_TYPES.get(SPECS[name].kind, TYPE_STRING)


def is_sensitive(name: str) -> bool:
    return BROKER_TYPES.get(name) == TYPE_PASSWORD


def broker_synonyms(name: str, settings: NodeSettings) -> list[Synonym]:
    """Where a broker config's value comes from, most specific first: the static setting
    (given to the node) and the default (when not null)."""
    hidden = is_sensitive(name)
    out: list[Synonym] = []
    spec = SPECS.get(name)
    if spec is None:  # a topic config's broker name the node has as a fixed default
        topic = next(t for t, b in FIXED_BROKER_SYNONYMS.items() if b == name)
        return [Synonym(name, FIXED_DEFAULTS[topic], SOURCE_DEFAULT)]
    if settings.given(name):
        value = None if hidden else render_setting(settings.get(name))
        out.append(Synonym(name, value, SOURCE_STATIC_BROKER))
        hours = HOURS_SYNONYMS.get(name)
        if hours is not None:
            out.append(Synonym(hours, str(spec.default // 3_600_000), SOURCE_DEFAULT))
    if name not in NULL_DEFAULTS:
        value = None if hidden else render_setting(spec.default)
        out.append(Synonym(name, value, SOURCE_DEFAULT))
    return out


def _entry(
    name: str,
    value: str | None,
    synonyms: list[Synonym],
    *,
    read_only: bool,
    sensitive: bool,
    config_type: int,
    doc: str,
    include_synonyms: bool,
    include_documentation: bool,
) -> dict[str, Any]:
    source = synonyms[0].source if synonyms else SOURCE_DEFAULT
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == SOURCE_DEFAULT,  # v0 only (not served)
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": [s.as_dict() for s in synonyms] if include_synonyms else [],
        "config_type": config_type,
        "documentation": doc if include_documentation else None,
    }


def broker_entry(
    name: str, settings: NodeSettings, *, include_synonyms: bool, include_documentation: bool
) -> dict[str, Any]:
    """A broker config as a broker describes itself (its id as the resource name)."""
    sensitive = is_sensitive(name)
    unset_null = name in NULL_DEFAULTS and not settings.given(name)
    value = None if sensitive or unset_null else render_setting(settings.get(name))
    return _entry(
        name,
        value,
        broker_synonyms(name, settings),
        read_only=name not in KAFKA_DYNAMIC_BROKER_CONFIGS,
        sensitive=sensitive,
        config_type=broker_type(name),
        doc=SPECS[name].doc,
        include_synonyms=include_synonyms,
        include_documentation=include_documentation,
    )


def topic_broker_synonym(name: str) -> str | None:
    """The broker config standing in for topic config ``name`` (Kafka's
    ServerTopicConfigSynonyms), or None."""
    key = TOPIC_CONFIG_KEYS[name]
    return key.broker_default_key or FIXED_BROKER_SYNONYMS.get(name)


def topic_entry(
    name: str,
    value: str,
    overrides: dict[str, str],
    settings: NodeSettings,
    *,
    include_synonyms: bool,
    include_documentation: bool,
) -> dict[str, Any]:
    """A topic config: its override first (TOPIC_CONFIG), then its broker config's
    synonyms."""
    synonyms: list[Synonym] = []
    if name in overrides:
        synonyms.append(Synonym(name, overrides[name], SOURCE_TOPIC))
    broker_name = topic_broker_synonym(name)
    if broker_name is not None:
        synonyms.extend(broker_synonyms(broker_name, settings))
    key = TOPIC_CONFIG_KEYS[name]
    return _entry(
        name,
        value,
        synonyms,
        read_only=False,
        sensitive=False,
        config_type=TOPIC_TYPES.get(name) or _TOPIC_KIND_TYPES[key.kind],
        doc=key.doc,
        include_synonyms=include_synonyms,
        include_documentation=include_documentation,
    )
