"""Fault rules for the proxy: typed models (the scenario YAML's ``faults`` entries), one
module per kind, each carrying what it does to a frame or a link; :data:`RULE_TYPES` is
the registry.

Every rule has a ``kind`` (the discriminator) and selects links by name or glob
(``link``, one pattern or a list), a ``direction`` and an optional time ``window``.
Frame rules (``delay``, ``drop_request``, ``drop_response``, ``reorder``,
``duplicate``, ``strip_partition``, ``stale_marker``) can further select frames by API
(``api``: names or numbers), ``transactional_id`` (glob), ``producer_id``, and apply only
to the ``nth`` match and/or with a ``probability``. Link rules (``blackhole``, ``reset``,
``throttle``) apply to every byte of the link while active.

Example (YAML)::

    - kind: delay
      link: "client->*"
      api: [Produce, EndTxn]
      transactional_id: "txn-*"
      ms: 200
      jitter: uniform
      jitter_ms: 50
      window: {start: 10, end: 40}          # seconds after the fleet started
    - kind: blackhole
      link: "n1->n2"
      window: {start: 1700000000.0, end: 1700000030.0, clock: absolute}

Adding a kind: a module here with its model (a ``FrameRuleBase`` with ``on_request`` /
``on_response``, or a ``LinkRuleBase`` with ``shape_link``) and an entry in
:data:`RULE_TYPES`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field, TypeAdapter

from .base import Direction, FrameRuleBase, LinkRuleBase, RuleBase, Window
from .blackhole import BlackholeRule
from .delay import DelayRule
from .drop_request import DropRequestRule
from .drop_response import DropResponseRule
from .duplicate import DuplicateRule
from .reorder import ReorderRule
from .reset import ResetRule
from .runtime import (
    NO_FAULTS,
    LinkPolicy,
    PolicyParts,
    RuleState,
    TokenBucket,
    compute_policy,
    rule_rng,
)
from .stale_marker import StaleMarkerRule
from .strip_partition import StripPartitionRule
from .throttle import ThrottleRule

RULE_TYPES: tuple[type[RuleBase], ...] = (
    DelayRule,
    DropRequestRule,
    DropResponseRule,
    ReorderRule,
    DuplicateRule,
    StripPartitionRule,
    StaleMarkerRule,
    BlackholeRule,
    ResetRule,
    ThrottleRule,
)
"""Every rule kind the proxy knows (the registry)."""

RULE_KINDS: dict[str, type[RuleBase]] = {t.model_fields["kind"].default: t for t in RULE_TYPES}
FRAME_KINDS = frozenset(k for k, t in RULE_KINDS.items() if issubclass(t, FrameRuleBase))
LINK_KINDS = frozenset(k for k, t in RULE_KINDS.items() if issubclass(t, LinkRuleBase))

if TYPE_CHECKING:
    Rule = RuleBase
else:
    Rule = Annotated[Union[RULE_TYPES], Field(discriminator="kind")]  # noqa: UP007

RULE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Rule)
RULE_LIST_ADAPTER: TypeAdapter[Any] = TypeAdapter(list[Rule])


def parse_rule(data: Any) -> RuleBase:
    """Validate one rule given as a dict (from YAML/JSON) or a model instance."""
    if isinstance(data, RuleBase):
        return data
    rule: RuleBase = RULE_ADAPTER.validate_python(data)
    return rule


def parse_rules(data: Iterable[Any]) -> list[RuleBase]:
    return [parse_rule(x) for x in data]


def dump_rule(rule: RuleBase) -> dict[str, Any]:
    """A plain dict that :func:`parse_rule` turns back into an equal rule."""
    return rule.to_yaml_dict()


__all__ = [
    "FRAME_KINDS",
    "LINK_KINDS",
    "NO_FAULTS",
    "RULE_ADAPTER",
    "RULE_KINDS",
    "RULE_LIST_ADAPTER",
    "RULE_TYPES",
    "BlackholeRule",
    "DelayRule",
    "Direction",
    "DropRequestRule",
    "DropResponseRule",
    "DuplicateRule",
    "FrameRuleBase",
    "LinkPolicy",
    "LinkRuleBase",
    "PolicyParts",
    "ReorderRule",
    "ResetRule",
    "Rule",
    "RuleBase",
    "RuleState",
    "StaleMarkerRule",
    "StripPartitionRule",
    "ThrottleRule",
    "TokenBucket",
    "Window",
    "compute_policy",
    "dump_rule",
    "parse_rule",
    "parse_rules",
    "rule_rng",
]
