"""Rule (d) of the metrics checker (rules/metrics.py states it), transaction counters
against the history: each node's counter samples in time order, the restarts that end a
node's counting process, and what the history says the counters must reach."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...rundir.schema import MetricName as M
from ..model.facts import RunFacts
from ..model.indexes import Indexes
from ..model.judged import Judged, row
from .metric_samples import (
    COUNTERS,
    NEVER,
    RESET_FAULTS,
    counter_violation,
    cut_short,
    restart_note,
)

NAME = "metrics"
Sample = dict[str, Any]


@dataclass
class Counter:
    """One node's samples of one counter, in time order."""

    node: str
    name: str
    samples: list[Sample]

    @property
    def total(self) -> float:
        """Its increases summed, a drop read as a restart from zero."""
        out, prev = 0.0, None
        for m in self.samples:
            v = m["value"]
            out += v if prev is None or v < prev else v - prev
            prev = v
        return out

    @property
    def drops(self) -> list[tuple[int, int]]:
        """(time of the sample before, time) of every sample below the one before: the
        restarts the counter shows."""
        pairs = zip(self.samples, self.samples[1:], strict=False)
        return [(a["time_ns"], b["time_ns"]) for a, b in pairs if b["value"] < a["value"]]


def counters(samples: list[Sample]) -> list[Counter]:
    by: dict[tuple[str, str], list[Sample]] = {}
    for m in samples:
        if m["name"] in COUNTERS and m.get("topic") is None:
            by.setdefault((m["node"], m["name"]), []).append(m)
    return [
        Counter(node, name, sorted(ms, key=lambda m: m["time_ns"]))
        for (node, name), ms in sorted(by.items())
    ]


def _node_number(name: str | None) -> int | None:
    """The node id a name ends with (``node-1001``, ``n2``, ``1001``), if any."""
    digits = re.search(r"(\d+)$", (name or "").strip())
    return None if digits is None else int(digits.group(1))


def _hits(fault: dict[str, Any], node: str) -> bool:
    """Whether a node fault ends ``node``'s process (a fault or node not told: assume so)."""
    if fault["kind"] not in RESET_FAULTS:
        return False
    target, mine = _node_number(fault.get("target")), _node_number(node)
    return target is None or mine is None or target == mine


def last_restarts(faults: list[dict[str, Any]], cs: list[Counter]) -> dict[str, tuple[int, int]]:
    """Per counting node that restarted: the end of its last kill or restart in the fault log
    (NEVER if it did not end; 0 if none) and the last of its counter drops that no such fault
    explains (0 if none)."""
    out: dict[str, tuple[int, int]] = {}
    for node in sorted({c.node for c in cs}):
        spans = [
            (int(f["start_ns"]), NEVER if f.get("end_ns") is None else int(f["end_ns"]))
            for f in faults
            if _hits(f, node)
        ]
        unexplained = [
            t
            for c in cs
            if c.node == node
            for before, t in c.drops
            if all(not (start < t and end > before) for start, end in spans)
        ]
        fault_end = max((end for _, end in spans), default=0)
        if spans or unexplained:
            out[node] = (fault_end, max(unexplained, default=0))
    return out


def expected(ix: Indexes, since: int | None) -> dict[str, int]:
    """Acknowledged and unknown-outcome commits, aborts the coordinator hears of (of
    transactions that wrote something); ``*_after``: commits invoked / aborted transactions
    begun after ``since``."""
    ok = info = aborted = ok_after = aborted_after = 0
    for t in ix.txns.values():
        if not (t.n_sends > 0 or t.has_offsets):
            continue
        heard_abort = t.abort_ok and not t.commit_ok and (t.n_acked > 0 or t.has_offsets)
        ok += t.commit_ok
        info += not t.commit_ok and t.commit_info
        aborted += heard_abort
        if t.commit_ok and (since is None or (t.commit_invoke_ns or 0) > since):
            ok_after += 1
        if heard_abort and (since is None or (t.begin_ns or 0) > since):
            aborted_after += 1
    return {
        "ok": ok,
        "info": info,
        "aborted": aborted,
        "ok_after": ok_after,
        "aborted_after": aborted_after,
    }


def judge_counters(ix: Indexes, facts: RunFacts, out: Judged, samples: list[Sample]) -> None:
    cs = counters(samples)
    if not cs:
        return
    restarted = last_restarts(facts.faults, cs)
    since = max((max(pair) for pair in restarted.values()), default=None)
    n = expected(ix, since)
    if since is not None:
        out.notes.append(restart_note(restarted, since, facts.info.get("started_ns"), n))
    for name in COUNTERS:
        mine = [c for c in cs if c.name == name]
        if mine:
            _judge_one(facts, out, name, mine, restarted, since, n)


def _judge_one(
    facts: RunFacts,
    out: Judged,
    name: str,
    mine: list[Counter],
    restarted: dict[str, tuple[int, int]],
    since: int | None,
    n: dict[str, int],
) -> None:
    commits = name == M.TXNS_COMMITTED.value
    unseen = []
    for c in mine:
        fault_end, drop = restarted.get(c.node, (0, 0))
        last_ns = c.samples[-1]["time_ns"]
        if not (last_ns > fault_end and last_ns >= drop):
            unseen.append(c.node)
    short = cut_short(facts.info) is not None
    last = None if unseen or short else sum(c.samples[-1]["value"] for c in mine)
    total = sum(c.total for c in mine)
    if unseen and not short:  # a run cut short: the checker's notes say why
        out.notes.append(
            f"{name}: lower bound not checked: {', '.join(unseen)} not scraped after its last "
            "restart"
        )
    elif last is not None:
        out.checked["committed_counter_lower" if commits else "aborted_counter"] = 1
    if commits:
        out.checked["committed_counter"] = 1
    ev = counter_violation(name, total, last, since, n)
    if ev is None:
        return
    end = facts.info.get("ended_ns")
    out.rows.append(row(NAME, "transaction_counters", end, ev, as_json=False))
