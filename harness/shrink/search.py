"""The reduction: a candidate is scenario data (the YAML as a dict) with an explicit
fault schedule; ``fails(candidate)`` re-runs it and says whether the anomaly is still
there. Faults are reduced by delta debugging (Zeller's ddmin: drop halves, then
quarters, ... keeping any subset or complement that still fails), then the workload's
duration is halved while the faults fit and it still fails, then users are removed or
thinned one at a time. Every accepted step makes the candidate strictly smaller."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Scenario = dict[str, Any]
Action = dict[str, Any]

MIN_DURATION_S = 2.0


class BudgetSpent(Exception):
    """The time budget ran out: the search keeps the smallest failing candidate so far."""


@dataclass
class Size:
    faults: int
    duration: float
    users: int

    def smaller_than(self, other: Size) -> bool:
        mine, theirs = (
            (self.faults, self.duration, self.users),
            (
                other.faults,
                other.duration,
                other.users,
            ),
        )
        return all(a <= b for a, b in zip(mine, theirs, strict=True)) and mine != theirs


def size_of(s: Scenario) -> Size:
    users = s.get("workload", {}).get("users", [])
    return Size(
        faults=len(s.get("nemesis", {}).get("actions", [])),
        duration=float(s.get("duration", 60.0)),
        users=sum(int(u.get("count", 1)) for u in users),
    )


def with_actions(s: Scenario, actions: list[Action]) -> Scenario:
    out = copy.deepcopy(s)
    out.setdefault("nemesis", {})["actions"] = copy.deepcopy(actions)
    out["nemesis"].pop("random", None)
    return out


@dataclass
class Search:
    fails: Callable[[Scenario], bool]
    log: Callable[[str], None] = lambda _: None
    tried: dict[str, bool] = field(default_factory=dict)
    best: Scenario | None = None  # the smallest candidate seen failing

    def test(self, candidate: Scenario, what: str) -> bool:
        key = json.dumps(candidate, sort_keys=True)
        if key not in self.tried:
            self.tried[key] = self.fails(candidate)
            self.log(f"{'still fails' if self.tried[key] else 'passes'}: {what}")
            if self.tried[key] and (
                self.best is None or size_of(candidate).smaller_than(size_of(self.best))
            ):
                self.best = candidate
        return self.tried[key]

    # -- faults ------------------------------------------------------------------------
    def faults(self, s: Scenario) -> Scenario:
        actions: list[Action] = list(s.get("nemesis", {}).get("actions", []))
        if not actions:
            return s
        if self.test(with_actions(s, []), "no faults at all"):
            return with_actions(s, [])
        n = 2
        while len(actions) >= 2:
            chunks = _split(actions, n)
            for i, chunk in enumerate(chunks):
                if self.test(with_actions(s, chunk), f"faults {_names(chunk)} only"):
                    actions, n = chunk, max(n - 1, 2)
                    break
                rest = [a for j, c in enumerate(chunks) if j != i for a in c]
                if n > 2 and self.test(with_actions(s, rest), f"without {_names(chunk)}"):
                    actions, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(actions):
                    break
                n = min(len(actions), 2 * n)
        return with_actions(s, actions)

    # -- duration ----------------------------------------------------------------------
    def duration(self, s: Scenario) -> Scenario:
        current = s
        while True:
            shorter = float(current.get("duration", 60.0)) / 2
            actions = current.get("nemesis", {}).get("actions", [])
            needed = max((a["at"] + a.get("duration", 0.0) for a in actions), default=0.0)
            if shorter < max(MIN_DURATION_S, needed):
                return current
            candidate = copy.deepcopy(current)
            candidate["duration"] = round(shorter, 3)
            if not self.test(candidate, f"a {shorter:g}s workload"):
                return current
            current = candidate

    # -- users -------------------------------------------------------------------------
    def users(self, s: Scenario) -> Scenario:
        current = s
        i = 0
        while i < len(current.get("workload", {}).get("users", [])):
            users = current["workload"]["users"]
            user = users[i]
            name = user.get("name") or user.get("kind")
            if len(users) > 1:
                candidate = copy.deepcopy(current)
                del candidate["workload"]["users"][i]
                if self.test(candidate, f"without the {name} users"):
                    current = candidate
                    continue
            count = int(user.get("count", 1))
            while count > 1:
                candidate = copy.deepcopy(current)
                candidate["workload"]["users"][i]["count"] = count - 1
                if not self.test(candidate, f"{count - 1} {name} user(s)"):
                    break
                current, count = candidate, count - 1
            i += 1
        return current

    def shrink(self, s: Scenario) -> Scenario:
        """The smallest failing candidate found (``s`` itself if nothing smaller fails);
        stops early, keeping the best so far, when the budget is spent."""
        self.best = s
        try:
            current = s
            for step in (self.faults, self.duration, self.users):
                current = step(current)
            return current
        except BudgetSpent:
            self.log("the budget is spent: keeping the smallest failing scenario so far")
            return self.best


def _split(items: list[Action], n: int) -> list[list[Action]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out


def _names(actions: list[Action]) -> str:
    return "[" + ", ".join(f"{a['kind']}@{a['at']:g}" for a in actions) + "]"
