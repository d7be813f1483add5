"""Consume-transform-produce: for each copier group (producers that call
send_offsets_to_transaction), every input record visible in the final read and below the
group's committed position (the highest offset sent with send_offsets in a committed
transaction) has exactly one output record (a write whose ``source`` is that input's value) in
the final read; input records at or above the committed position have none (outputs and
offsets commit atomically). Counts: missing outputs, duplicated outputs (inputs with more than
one), outputs ahead of the committed offsets."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..model.facts import RunFacts
from ..model.indexes import (
    COMMITTED,
    E,
    Indexes,
    Record,
)
from ..model.judged import Judged, row

NAME = "consume_transform_produce"
KINDS: tuple[str, ...] = ("missing_output", "duplicate_output", "output_ahead_of_offsets")


def committed_positions(ix: Indexes) -> dict[tuple[str, tuple[str, int]], int]:
    """Per (copier group, input partition): the highest offset sent with send_offsets in a
    committed transaction of the sender."""
    out: dict[tuple[str, tuple[str, int]], int] = {}
    for op in ix.ops:
        if op.type != E.SEND_OFFSETS or op.group_id is None or op.txn is None:
            continue
        t = ix.txns.get((op.process, op.txn))
        if t is None or t.status != COMMITTED:
            continue
        for it in op.items:
            if it.tp is None or it.offset is None or it.tp[0] not in ix.topics:
                continue
            key = (op.group_id, it.tp)
            out[key] = max(out.get(key, it.offset), it.offset)
    return out


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """For each copier group and each input record in the final read (at its least place) in a
    partition the group committed a position for: below the position it has exactly one output
    in the final read (a finally read value whose write names the group and the input as its
    source); at or above it, none.  Kinds: missing_output (below, none), duplicate_output (more
    than one), output_ahead_of_offsets (at or above, some); an input can be two of them.  One
    row per (group, input, kind), at the input's first read."""
    out = Judged(NAME, KINDS)
    if not ix.ops_by_type.get(E.SEND_OFFSETS):
        out.unknown = "no consume-transform-produce copier in this run (no send_offsets)"
        return out
    if not ix.has_final_read:
        out.unknown = "no final read: the visible outputs are unknown"
        return out
    positions = committed_positions(ix)
    if not positions:
        out.notes.append("no send_offsets in a committed transaction: no input records to check")
    groups_of: dict[tuple[str, int], list[str]] = defaultdict(list)
    for group, tp in positions:
        groups_of[tp].append(group)
    final = [rec for rec in ix.records.values() if rec.n_final > 0]
    outputs: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for rec in final:
        w = rec.write
        if w is not None and w.op.group_id is not None and w.item.source is not None:
            outputs[(w.op.group_id, w.item.source)].append(rec)
    for rec in final:
        if not rec.places:
            continue
        topic, part, off = rec.places[0]
        for group in groups_of.get((topic, part), []):
            pos = positions[(group, (topic, part))]
            outs = sorted(outputs.get((group, rec.value), []), key=lambda r: r.value)
            n = len(outs)
            ends = (outs[0], outs[-1]) if outs else ()
            shown: list[dict[str, Any] | None] = [
                {"value": r.value, "loc_min": r.loc_min} for r in ends
            ] or [None, None]
            ev = {
                "group": group,
                "input": {"value": rec.value, "topic": topic, "partition": part, "offset": off},
                "group_committed_position": pos,
                "outputs_in_final_read": n,
                "outputs_first_last": shown,
            }
            found = {
                "missing_output": off < pos and n == 0,
                "duplicate_output": n > 1,
                "output_ahead_of_offsets": off >= pos and n > 0,
            }
            for kind in KINDS:
                if found[kind]:
                    out.rows.append(row(out.name, kind, rec.first_read_ns, ev))
    return out
