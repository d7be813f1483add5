"""Topic-level configuration: the keys we honour, their defaults and validation.

Values are checked as Kafka 4.x's ``LogConfig`` defines them (type and range), so a
CreateTopics carrying ``segment.ms=0`` or ``segment.bytes=3000000000`` gets INVALID_CONFIG
with Kafka's reason instead of being stored; a value stored before these checks existed is
skipped with an error in the broker's log (:func:`usable_overrides`), never fatal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..settings import NodeSettings

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_RANGES = {"INT": (-(2**31), INT32_MAX), "LONG": (-(2**63), INT64_MAX)}


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str
    broker_default_key: str | None
    kind: str  # "INT", "LONG" (Kafka's ConfigDef types) or "STRING"
    allowed: tuple[str, ...] = ()
    minimum: int | None = None  # Kafka's Range.atLeast
    doc: str = ""  # what DescribeConfigs answers with include_documentation

    def check(self, value: str) -> str | None:
        """Why ``value`` is invalid for this key (Kafka's wording), or None."""
        if self.kind in _RANGES:
            low, high = _RANGES[self.kind]
            try:
                number = int(value.strip())
            except ValueError:
                return f"Not a number of type {self.kind}"
            if not low <= number <= high:
                return f"Not a number of type {self.kind}"
            if self.minimum is not None and number < self.minimum:
                return f"Value must be at least {self.minimum}"
            return None
        if self.allowed and value not in self.allowed:
            return f"txnchaos nodes support only {', '.join(self.allowed)}"
        return None


TOPIC_CONFIG_KEYS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in (
        TopicConfigKey(
            "cleanup.policy",
            None,
            "STRING",
            ("delete",),
            doc="what happens to old segments: deleted by retention (the nodes do not compact)",
        ),
        TopicConfigKey(
            "retention.ms",
            "log.retention.ms",
            "LONG",
            minimum=-1,
            doc="delete a segment once its newest record is older than this (-1: never)",
        ),
        TopicConfigKey(
            "retention.bytes",
            "log.retention.bytes",
            "LONG",
            doc="delete the oldest segments while a partition is larger than this (-1: no limit)",
        ),
        # Kafka 4.x: segment.bytes is an INT of at least 1 MiB (KIP-1030).
        TopicConfigKey(
            "segment.bytes",
            "log.segment.bytes",
            "INT",
            minimum=1024 * 1024,
            doc="roll to a new segment once the active one holds this many bytes",
        ),
        TopicConfigKey(
            "segment.ms",
            "log.roll.ms",
            "LONG",
            minimum=1,
            doc="roll to a new segment once the active one is this old",
        ),
        TopicConfigKey(
            "index.interval.bytes",
            "log.index.interval.bytes",
            "INT",
            minimum=0,
            doc="bytes of batches between two offset-index entries",
        ),
        TopicConfigKey(
            "max.message.bytes",
            "message.max.bytes",
            "INT",
            minimum=0,
            doc="the largest record batch a partition accepts",
        ),
        TopicConfigKey(
            "message.timestamp.type",
            None,
            "STRING",
            ("CreateTime",),
            doc="which timestamp records keep: the producer's (CreateTime)",
        ),
        TopicConfigKey(
            "message.timestamp.before.max.ms",
            "log.message.timestamp.before.max.ms",
            "LONG",
            minimum=0,
            doc="how far behind the broker's clock a record's timestamp may be",
        ),
        TopicConfigKey(
            "message.timestamp.after.max.ms",
            "log.message.timestamp.after.max.ms",
            "LONG",
            minimum=0,
            doc="how far ahead of the broker's clock a record's timestamp may be",
        ),
        TopicConfigKey(
            "min.insync.replicas",
            "min.insync.replicas",
            "INT",
            minimum=1,
            doc="accepted for compatibility and not enforced (the nodes keep one replica)",
        ),
        TopicConfigKey(
            "compression.type",
            None,
            "STRING",
            ("producer",),
            doc="how batches are stored: as the producer compressed them (producer)",
        ),
    )
}

FIXED_DEFAULTS = {
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "compression.type": "producer",
}


class InvalidTopicConfig(ValueError):
    pass


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Check user-given topic configs; returns the normalised overrides."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            raise InvalidTopicConfig(f"Unknown topic config name: {name}")
        if value is None:
            continue
        problem = key.check(value)
        if problem is not None:
            raise InvalidTopicConfig(f"Invalid value {value} for configuration {name}: {problem}")
        out[name] = value.strip() if key.kind in _RANGES else value
    return out


def usable_overrides(topic: str, overrides: dict[str, str]) -> dict[str, str]:
    """The stored overrides a broker can use: one that is unknown or invalid (stored by an
    older node that did not check it) is left out with an error in the log, so the
    topic's partitions open with the broker's default instead of failing the node."""
    out: dict[str, str] = {}
    for name, value in overrides.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        problem = "unknown config" if key is None else key.check(value)
        if problem is not None:
            log.error(
                "topic %s: ignoring stored config %s=%r (%s); using the broker default",
                topic,
                name,
                value,
                problem,
            )
            continue
        out[name] = value
    return out


def effective_topic_configs(
    overrides: dict[str, str], settings: NodeSettings
) -> dict[str, tuple[str, bool]]:
    """name -> (value, is_default) for every topic config key."""
    result: dict[str, tuple[str, bool]] = {}
    for name, key in TOPIC_CONFIG_KEYS.items():
        if name in overrides:
            result[name] = (overrides[name], False)
        elif key.broker_default_key is not None:
            result[name] = (str(settings.get(key.broker_default_key)), True)
        else:
            result[name] = (FIXED_DEFAULTS[name], True)
    return result
