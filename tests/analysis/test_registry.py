"""The checker registry: every checker declares what it reads, and the pipeline's schedule
(which projections to build, which checkers run together) follows from those declarations."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txnchaos.analysis import pipeline
from txnchaos.analysis.checkers import protocol
from txnchaos.analysis.checkers.protocol import Reads
from txnchaos.analysis.checkers.registry import CHECKERS, schedule


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
