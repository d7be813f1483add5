"""Refused request: a request that a correct cluster must refuse, sent on purpose by a hostile
client (a PROBE op: a sequence gap, a non-transactional batch inside the producer's open
transaction, an older or skipped epoch, a commit after an abort, offsets from a producer whose
transaction never added the group, a fenced instance's write or commit), was accepted (answered
without error), or its record was returned by a read (whatever the answer said: one lost on
its way back hides nothing). Which refusal came back is not judged, only that one did.
Count: probes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...rundir.schema import EventType as E
from ...rundir.schema import Outcome
from ..model.facts import RunFacts
from ..model.history import Item, Op
from ..model.indexes import Indexes
from ..model.judged import Judged, row

NAME = "refused_request"
KINDS: tuple[str, ...] = ("refused_request_accepted", "refused_write_visible")


def _probe(op: Op, it: Item | None) -> dict[str, Any]:
    return {
        "process": op.process,
        "op_id": op.op_id,
        "kind": None if it is None else it.key,
        "expected": None if it is None else it.source,
        "outcome": None if op.outcome is None else op.outcome.value,
        "error": op.error,
        "transactional_id": op.transactional_id,
        "producer_id": op.producer_id,
        "producer_epoch": op.producer_epoch,
        "group_id": op.group_id,
        "topic": None if it is None else it.topic,
        "partition": None if it is None else it.partition,
        "offset": None if it is None else it.offset,
        "value": None if it is None else it.value,
        "invoke_ns": op.invoke_ns,
        "complete_ns": op.complete_ns,
    }


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """One row per probe answered ok (at its completion), and one per probe whose value any
    read returned (at the first such read: by invocation time, process, op and item)."""
    out = Judged(NAME, KINDS)
    ops: Sequence[Op] = ix.ops
    probes: list[tuple[Op, Item | None]] = []
    for op in ops:
        if op.type == E.PROBE:
            probes.extend((op, it) for it in op.items) if op.items else probes.append((op, None))
    out.checked["probes"] = len(probes)
    by_value: dict[str, tuple[Op, Item | None]] = {}
    for op, it in probes:
        if op.outcome == Outcome.OK:
            ev = {"probe": _probe(op, it)}
            out.rows.append(row(NAME, "refused_request_accepted", op.complete_ns, ev))
        if it is not None and it.value is not None:
            by_value[it.value] = (op, it)
    seen: dict[str, list[Any]] = {}
    for op in ops:
        if op.type not in (E.POLL, E.FINAL_READ):
            continue
        for i, it in enumerate(op.items):
            if it.value is None or it.value not in by_value:
                continue
            key = (op.invoke_ns, op.process, op.op_id, i)
            entry = seen.get(it.value)
            if entry is None:
                seen[it.value] = [key, op, it, 1]
            else:
                entry[3] += 1
                if key < entry[0]:
                    entry[0:3] = [key, op, it]
    for value, (_, op, it, n) in seen.items():
        probe, pit = by_value[value]
        ev = {
            "probe": _probe(probe, pit),
            "first_read": {
                "process": op.process,
                "op_id": op.op_id,
                "type": op.type.value,
                "t": op.invoke_ns,
                "topic": it.topic,
                "partition": it.partition,
                "offset": it.offset,
            },
            "times_read": n,
        }
        out.rows.append(row(NAME, "refused_write_visible", op.invoke_ns, ev))
    return out
