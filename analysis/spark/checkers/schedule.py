"""The Spark implementation of every registered rule (rules/registry.py: the one registry),
and the schedule the pipeline derives from what each one reads.

Each rule's implementation is ``spark/checkers/<NAME>.py``, naming the rule it implements
(``RULE``); a registered rule without one, or an implementation naming another rule, fails
at import. The pipeline builds the projections the implementations read and groups them by it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ...rules.registry import RULES, Rule
from .protocol import BY_STREAM, BY_VALUE, Checker


def implementation(rule: Rule) -> Checker:
    """The Spark implementation of ``rule`` (spark/checkers/<NAME>.py)."""
    try:
        module = importlib.import_module(f"{__package__}.{rule.NAME}")
    except ModuleNotFoundError as e:
        raise LookupError(f"rule {rule.NAME} has no Spark implementation: {e}") from e
    impl: Checker = module
    if getattr(impl, "RULE", None) is not rule:
        raise LookupError(f"spark/checkers/{rule.NAME}.py does not implement rules/{rule.NAME}")
    return impl


#: every rule's Spark implementation, in the order verdicts list them
CHECKERS: tuple[Checker, ...] = tuple(implementation(r) for r in RULES)


@dataclass(frozen=True)
class Schedule:
    """How the pipeline runs the checkers: ``side`` beside the two shuffles of the history
    (they read neither), then ``groups`` at once, each with its own anomaly job: what reads
    the streams, and what reads only the values.  ``by_value``/``by_stream``: whether those
    shuffles are needed at all."""

    side: tuple[Checker, ...]
    groups: tuple[tuple[Checker, ...], ...]
    by_value: bool
    by_stream: bool


def schedule(checkers: tuple[Checker, ...] = CHECKERS) -> Schedule:
    """The :class:`Schedule` of ``checkers``, from what each one reads."""
    shuffled = BY_VALUE | BY_STREAM
    side = tuple(c for c in checkers if not c.READS & shuffled)
    streams = tuple(c for c in checkers if c.READS & BY_STREAM)
    values = tuple(c for c in checkers if c.READS & BY_VALUE and not c.READS & BY_STREAM)
    return Schedule(
        side=side,
        groups=tuple(g for g in (streams, values) if g),
        by_value=any(c.READS & BY_VALUE for c in checkers),
        by_stream=any(c.READS & BY_STREAM for c in checkers),
    )
