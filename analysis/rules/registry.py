"""Every checker, in the order verdicts list them: the one registry both engines judge by.

Adding a checker: its rule module beside the others (the docstring is its definition; ``NAME``,
``KINDS`` and ``rule(ix, facts)``, the rule in plain Python), its Spark implementation
(spark/checkers/<NAME>.py: ``RULE``, ``READS``, ``check``), and one line in :data:`RULES`. The
agreement tests (tests/analysis/test_reference_agrees.py, test_engines_agree.py) fail until the
Spark implementation returns the rule's rows.
"""

from __future__ import annotations

from typing import Protocol

from ..model.facts import RunFacts
from ..model.indexes import Indexes
from ..model.judged import Judged
from . import (
    aborted_read,
    committed_offsets,
    consume_transform_produce,
    dual_write,
    duplicate,
    fenced_commit,
    hanging_transactions,
    inconsistent_offsets,
    indeterminate_commit,
    lost_write,
    metrics,
    ordering,
    precommitted_read,
    refused_request,
    torn_transaction,
    unwritten_read,
)


class Rule(Protocol):
    """One rule module (rules/aborted_read.py is a short one)."""

    @property
    def NAME(self) -> str: ...

    @property
    def KINDS(self) -> tuple[str, ...]: ...

    def rule(self, ix: Indexes, facts: RunFacts) -> Judged: ...


#: every checker's rule, in the order verdicts list them
RULES: tuple[Rule, ...] = (
    aborted_read,
    precommitted_read,
    lost_write,
    duplicate,
    inconsistent_offsets,
    unwritten_read,
    ordering,
    torn_transaction,
    consume_transform_produce,
    indeterminate_commit,
    fenced_commit,
    committed_offsets,
    refused_request,
    hanging_transactions,
    dual_write,
    metrics,
)


def definition(rule: Rule) -> str:
    """A checker's written definition: its rule module's docstring, whitespace-normalised."""
    return " ".join((getattr(rule, "__doc__", None) or "").split())


def by_name() -> dict[str, Rule]:
    return {r.NAME: r for r in RULES}
