"""Fenced commit: a transactional producer instance's commit was acknowledged although a newer
instance of its transactional id had already initialised. An instance is a process's latest
successful init (InitProducerId) of that id before the commit; it is fenced once another
process's init of the same id, invoked after the instance's init completed, has completed:
from then on the coordinator refuses the old epoch, so no commit invoked later may succeed
(a zombie's commit). Transactional ids that prepared a two-phase commit (KIP-939, where a new
instance completes the old one's prepared transaction on purpose) are not judged.
Count: acknowledged commits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ...rundir.schema import EventType as E
from ...rundir.schema import Outcome
from ..model.facts import RunFacts
from ..model.history import Op
from ..model.indexes import Indexes
from ..model.judged import Judged, row

NAME = "fenced_commit"
KINDS: tuple[str, ...] = ("fenced_commit",)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """One row per acknowledged commit of an instance (the committing process's latest
    successful init of the id before the commit's invocation) that another process's init of
    the same id, invoked after that init completed, completed before the commit's invocation
    (the earliest-completing such init is the evidence), at the commit's completion."""
    out = Judged(NAME, KINDS)
    ops: Sequence[Op] = ix.ops
    inits: dict[str, list[Op]] = defaultdict(list)
    two_phase: set[str] = set()
    commits: list[Op] = []
    for op in ops:
        if op.transactional_id is None:
            continue
        if op.type == E.PREPARE:
            two_phase.add(op.transactional_id)
        elif op.outcome != Outcome.OK:
            continue
        elif op.type == E.INIT:
            inits[op.transactional_id].append(op)
        elif op.type == E.COMMIT:
            commits.append(op)
    commits = [c for c in commits if c.transactional_id not in two_phase]
    out.checked["commits"] = len(commits)
    for c in commits:
        assert c.transactional_id is not None and c.complete_ns is not None
        tid_inits = inits.get(c.transactional_id, [])
        own = [
            i
            for i in tid_inits
            if i.process == c.process and i.complete_ns is not None and i.complete_ns <= c.invoke_ns
        ]
        if not own:
            continue
        mine = max(own, key=lambda i: (i.complete_ns, i.invoke_ns))
        assert mine.complete_ns is not None
        newer = [
            i
            for i in tid_inits
            if i.process != c.process
            and i.invoke_ns > mine.complete_ns
            and i.complete_ns is not None
            and i.complete_ns < c.invoke_ns
        ]
        if not newer:
            continue
        first = min(newer, key=lambda i: (i.complete_ns, i.process, i.invoke_ns))
        ev = {
            "transactional_id": c.transactional_id,
            "commit": {
                "process": c.process,
                "txn": c.txn,
                "invoke_ns": c.invoke_ns,
                "complete_ns": c.complete_ns,
            },
            "instance_init": {
                "process": mine.process,
                "invoke_ns": mine.invoke_ns,
                "complete_ns": mine.complete_ns,
            },
            "newer_init": {
                "process": first.process,
                "invoke_ns": first.invoke_ns,
                "complete_ns": first.complete_ns,
            },
        }
        out.rows.append(row(NAME, "fenced_commit", c.complete_ns, ev))
    return out
