"""The one registry (rules/registry.py): every checker's rule module, its definition the
module's docstring; each rule's Spark implementation names the rule it implements and declares
what it reads, and the pipeline's schedule (which projections to build, which checkers run
together) follows from those declarations."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from txnchaos.analysis.rules.registry import RULES, definition
from txnchaos.analysis.spark import pipeline
from txnchaos.analysis.spark.checkers import protocol
from txnchaos.analysis.spark.checkers.protocol import Reads
from txnchaos.analysis.spark.checkers.schedule import CHECKERS, implementation, schedule


def _names(checkers: tuple[Any, ...]) -> set[str]:
    return {c.NAME for c in checkers}


def test_every_checker_is_judged_once() -> None:
    s = pipeline.SCHEDULE
    judged = [c.NAME for g in s.groups for c in g] + [c.NAME for c in s.side]
    assert sorted(judged) == sorted(c.NAME for c in CHECKERS)
    assert len(set(judged)) == len(judged)


def test_the_schedule_groups_checkers_by_the_shuffles_they_read() -> None:
    s = schedule(CHECKERS)
    assert _names(s.side) == {
        "fenced_commit",
        "committed_offsets",
        "hanging_transactions",
        "dual_write",
        "metrics",
    }
    streams, values = s.groups
    assert _names(streams) == {"ordering", "torn_transaction", "duplicate", "lost_write"}
    assert _names(values) == {
        "consume_transform_produce",
        "aborted_read",
        "precommitted_read",
        "inconsistent_offsets",
        "indeterminate_commit",
        "refused_request",
        "unwritten_read",
    }
    assert s.by_value and s.by_stream


def _checker(name: str, *reads: Reads) -> Any:
    return SimpleNamespace(NAME=name, KINDS=(name,), READS=frozenset(reads), check=None)


def test_a_new_checker_lands_where_its_reads_say() -> None:
    dual_write = _checker("dual_write", Reads.VALUES)
    s = schedule((*CHECKERS, dual_write))
    assert dual_write in s.groups[1] and dual_write not in s.groups[0]
    counters = _checker("counters", Reads.TRANSACTIONS, Reads.METRICS)
    assert counters in schedule((*CHECKERS, counters)).side


def test_only_the_shuffles_someone_reads_are_built() -> None:
    s = schedule((_checker("a", Reads.VALUES), _checker("b", Reads.FINAL_STATE)))
    assert s.by_value and not s.by_stream
    assert [_names(g) for g in s.groups] == [{"a"}]
    s = schedule((_checker("b", Reads.FINAL_STATE),))
    assert not s.by_value and not s.by_stream and s.groups == ()


def test_every_checker_declares_its_kinds_and_reads() -> None:
    for c in CHECKERS:
        assert c.NAME and c.KINDS and c.READS, c.NAME
        assert all(isinstance(r, Reads) for r in c.READS), c.NAME
        assert len(set(c.KINDS)) == len(c.KINDS), c.NAME
    assert protocol.BY_VALUE.isdisjoint(protocol.BY_STREAM)


def test_every_rule_has_a_spark_implementation_naming_it() -> None:
    assert [c.NAME for c in CHECKERS] == [r.NAME for r in RULES]
    for rule, impl in zip(RULES, CHECKERS, strict=True):
        assert impl.RULE is rule and (impl.NAME, impl.KINDS) == (rule.NAME, rule.KINDS)


def test_a_rule_without_a_spark_implementation_is_refused() -> None:
    with pytest.raises(LookupError, match="no Spark implementation"):
        implementation(SimpleNamespace(NAME="no_such_checker", KINDS=("x",), rule=None))
    other = SimpleNamespace(NAME="aborted_read", KINDS=("aborted_read",), rule=None)
    with pytest.raises(LookupError, match="does not implement"):
        implementation(other)  # spark/checkers/aborted_read.py implements the real rule


def test_each_definition_is_its_rule_modules_docstring() -> None:
    for rule in RULES:
        text = definition(rule)
        assert text and text == " ".join((rule.__doc__ or "").split()), rule.NAME
        assert "spark" not in text.lower(), rule.NAME  # the rule's words, not an engine's
