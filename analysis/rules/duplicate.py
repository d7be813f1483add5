"""Duplicate: (a) one value observed at more than one (topic, partition, offset) across acks and
reads — it was written to the log more than once; or (b) one value returned twice to one
consumer in one partition without a rewind point (assign, revoke, seek, or a restart of the
consumer) between the two polls.
Counts: (a) distinct values; (b) distinct (consumer, partition, epoch, value)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..model.facts import RunFacts
from ..model.indexes import (
    Indexes,
    Read,
    nulls_first,
    place_struct,
)
from ..model.judged import Judged, row

NAME = "duplicate"
KINDS: tuple[str, ...] = ("multiple_offsets", "redelivered")


def _returned(r: Read) -> dict[str, object]:
    return {"t": r.obs.t, "op_id": r.obs.op.op_id, "offset": r.offset}


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """(a) multiple_offsets: a value observed at more than one place (one row per value;
    evidence: the least observation at its least place and the greatest at its greatest, the
    row at the earlier of the two); (b) redelivered: a value returned more than
    once to one consumer in one partition within one epoch (one row per (consumer, partition,
    epoch, value), at its last return)."""
    out = Judged(NAME, KINDS)
    if not ix.has_reads:
        out.unknown = "no reads in the history"
        return out
    for rec in ix.records.values():
        if len(rec.places) > 1:
            lo, hi = rec.placements[rec.places[0]].lo, rec.placements[rec.places[-1]].hi
            ev: dict[str, Any] = {
                "value": rec.value,
                "seen_at": [place_struct(lo), place_struct(hi)],
            }
            out.rows.append(row(out.name, "multiple_offsets", min(lo.t, hi.t), ev))
    for span in ix.spans:
        by_value: dict[str, list[Read]] = defaultdict(list)
        for r in span.reads:
            by_value[r.obs.value].append(r)
        for value, reads in by_value.items():
            if len(reads) < 2:
                continue
            ordered = sorted(reads, key=lambda r: nulls_first(r.obs.t, r.obs.op.op_id, r.offset))
            first, last = ordered[0], ordered[-1]
            ev = {
                "consumer": span.consumer,
                "topic": span.tp[0],
                "partition": span.tp[1],
                "value": value,
                "times_returned": len(reads),
                "returns": [_returned(first), _returned(last)],
                "note": "no assign/revoke/seek/restart between these polls",
            }
            out.rows.append(row(out.name, "redelivered", last.obs.t, ev))
    return out
