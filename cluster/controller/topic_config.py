"""Topic-level configuration: the keys we honour, their defaults and validation."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import NodeSettings


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str
    broker_default_key: str | None
    kind: type
    allowed: tuple[str, ...] = ()


TOPIC_CONFIG_KEYS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in (
        TopicConfigKey("cleanup.policy", None, str, ("delete",)),
        TopicConfigKey("retention.ms", "log.retention.ms", int),
        TopicConfigKey("retention.bytes", "log.retention.bytes", int),
        TopicConfigKey("segment.bytes", "log.segment.bytes", int),
        TopicConfigKey("segment.ms", "log.roll.ms", int),
        TopicConfigKey("max.message.bytes", "message.max.bytes", int),
        TopicConfigKey("message.timestamp.type", None, str, ("CreateTime",)),
        TopicConfigKey("min.insync.replicas", "min.insync.replicas", int),
        TopicConfigKey("compression.type", None, str, ("producer",)),
    )
}

_FIXED_DEFAULTS = {
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
        if key.kind is int:
            try:
                int(value)
            except ValueError:
                raise InvalidTopicConfig(
                    f"Invalid value {value} for configuration {name}: not a number"
                ) from None
        if key.allowed and value not in key.allowed:
            raise InvalidTopicConfig(
                f"Invalid value {value} for configuration {name}: txnchaos nodes support "
                f"only {', '.join(key.allowed)}"
            )
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
            result[name] = (_FIXED_DEFAULTS[name], True)
    return result
