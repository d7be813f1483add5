"""Kafka-frame-aware TCP fault proxy: one proxy per link, rules applied per frame.

Public API: :class:`ProxyFleet` (links, rules, heal), the rule models in
:mod:`.rules` and :func:`parse_rule` for scenario YAML entries.
"""

from .link import LinkProxy, LinkStats
from .rules import (
    BlackholeRule,
    DelayRule,
    DropRequestRule,
    DropResponseRule,
    DuplicateRule,
    ReorderRule,
    ResetRule,
    Rule,
    ThrottleRule,
    Window,
    dump_rule,
    parse_rule,
    parse_rules,
)
from .server import ExternalCluster, ProxyFleet

__all__ = [
    "BlackholeRule",
    "DelayRule",
    "DropRequestRule",
    "DropResponseRule",
    "DuplicateRule",
    "ExternalCluster",
    "LinkProxy",
    "LinkStats",
    "ProxyFleet",
    "ReorderRule",
    "ResetRule",
    "Rule",
    "ThrottleRule",
    "Window",
    "dump_rule",
    "parse_rule",
    "parse_rules",
]
