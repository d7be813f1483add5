"""The reduction over a fake "does it still fail?" test: delta debugging finds exactly the
faults the failure needs, the workload is halved while it still fails and the faults
fit, users are removed or thinned, every accepted step is strictly smaller, and a spent
budget keeps the smallest failing candidate so far."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.harness.shrink.search import BudgetSpent, Search, size_of


def scenario(n_faults: int, duration: float = 40.0) -> dict[str, Any]:
    return {
        "name": "s",
        "seed": 3,
        "duration": duration,
        "workload": {
            "topics": [{"name": "events"}],
            "users": [
                {"kind": "transactional_producer", "name": "writer", "count": 3},
                {"kind": "read_committed_consumer", "name": "reader"},
                {"kind": "eos_copier", "name": "copier", "count": 2},
            ],
        },
        "nemesis": {
            "actions": [
                {"at": float(i), "kind": "delay", "duration": 1.0, "rule": {"ms": i}}
                for i in range(n_faults)
            ],
            "random": {"mix": {"delay": 1}, "intensity": 1},
        },
    }


def fault_ids(s: dict[str, Any]) -> set[int]:
    return {a["rule"]["ms"] for a in s["nemesis"]["actions"]}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 24), needed=st.sets(st.integers(0, 23), max_size=4))
def test_delta_debugging_finds_exactly_the_faults_the_failure_needs(
    n: int, needed: set[int]
) -> None:
    needed = {i for i in needed if i < n}
    calls: list[dict[str, Any]] = []

    def fails(s: dict[str, Any]) -> bool:
        calls.append(s)
        return needed <= fault_ids(s)

    result = Search(fails).faults(scenario(n))
    assert fault_ids(result) == needed
    assert "random" not in result["nemesis"]
    assert len(calls) <= max(1, 4 * len(needed) * max(1, n.bit_length()) + 2 * n)


def test_duration_halves_while_it_fails_and_the_faults_fit() -> None:
    base = scenario(1, duration=40.0)  # one fault ending at 1 s
    result = Search(lambda s: s["duration"] >= 5).duration(base)
    assert result["duration"] == 5.0  # 40 -> 20 -> 10 -> 5; 2.5 passes
    assert Search(lambda s: True).duration(base)["duration"] == 2.5  # floor: 2 s
    late = scenario(0)
    late["nemesis"]["actions"] = [{"at": 25.0, "kind": "kill", "duration": 4.0, "node": 1}]
    assert Search(lambda s: True).duration(late)["duration"] == 40.0  # 20 < 29


def test_users_are_removed_then_thinned() -> None:
    def fails(s: dict[str, Any]) -> bool:
        users = {u["name"]: u.get("count", 1) for u in s["workload"]["users"]}
        return users.get("writer", 0) >= 2

    result = Search(fails).users(scenario(0))
    assert result["workload"]["users"] == [
        {"kind": "transactional_producer", "name": "writer", "count": 2}
    ]


def test_every_accepted_step_is_strictly_smaller_and_the_whole_search_composes() -> None:
    seen: list[dict[str, Any]] = []

    def fails(s: dict[str, Any]) -> bool:
        ok = 3 in fault_ids(s) and s["duration"] >= 10
        if ok:
            seen.append(s)
        return ok

    base = scenario(6)
    result = Search(fails).shrink(base)
    assert fault_ids(result) == {3} and result["duration"] == 10.0
    assert size_of(result).users == 1
    assert size_of(result).smaller_than(size_of(base))


def test_a_spent_budget_keeps_the_smallest_failure_so_far() -> None:
    budget = [5]

    def fails(s: dict[str, Any]) -> bool:
        budget[0] -= 1
        if budget[0] < 0:
            raise BudgetSpent
        return True

    base = scenario(8)
    result = Search(fails).shrink(base)
    assert size_of(result).smaller_than(size_of(base))
    assert fault_ids(result) == set()  # "no faults at all" was the first thing tried
