"""Ordering: (a) non-monotonic poll — within one epoch (no assign, revoke or seek of the
partition, nor a restart of the consumer, in between) a consumer was returned an offset not
above the previous offset it got in that partition;
(b) skipped offset — within one epoch a consumer's reads of a partition passed over an offset
known to hold a committed record (acked by a committed transaction or returned to any
read_committed reader) without returning it; (c) producer order — two writes of one producer to
one partition, both committed, whose acked offsets are in the opposite order to the writes.
Counts: (a) offending reads; (b) committed records skipped; (c) offending write pairs."""

from __future__ import annotations

from itertools import pairwise

from ..model.facts import RunFacts
from ..model.indexes import (
    Indexes,
    Span,
)
from ..model.judged import Judged, row

NAME = "ordering"
KINDS: tuple[str, ...] = ("non_monotonic", "skipped", "producer_order")


def skipped_in(ix: Indexes, span: Span) -> tuple[int, int]:
    """(committed offsets between the span's first and last offset, how many it did not
    return)."""
    a, b = span.first_offset, span.last_offset
    if a is None or b is None:
        return 0, 0
    committed = [o for o in ix.committed_offsets.get(span.tp, ()) if a <= o <= b]
    return len(committed), len(set(committed) - span.offsets)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """(a) non_monotonic: a read not above the previous read of the same consumer, partition
    and epoch (one row per read); (b) skipped: within an epoch, committed offsets between the
    first and last offset read that were not returned (one row per epoch, weight: how many);
    (c) producer_order: a producer's committed write to a partition acked below its previous
    committed write there (one row per such write)."""
    out = Judged(NAME, KINDS)
    if ix.has_reads:
        for (consumer, tp), reads in ix.reads.items():
            for prev, r in pairwise(reads):
                if (
                    prev.epoch == r.epoch
                    and r.offset is not None
                    and prev.offset is not None
                    and r.offset <= prev.offset
                ):
                    ev = {
                        "consumer": consumer,
                        "topic": tp[0],
                        "partition": tp[1],
                        "previous": {
                            "offset": prev.offset,
                            "value": prev.obs.value,
                            "t": prev.obs.t,
                        },
                        "then": {
                            "offset": r.offset,
                            "value": r.obs.value,
                            "t": r.obs.t,
                            "op_id": r.obs.op.op_id,
                        },
                    }
                    out.rows.append(row(out.name, "non_monotonic", r.obs.t, ev))
        for span in ix.spans:
            in_range, skipped = skipped_in(ix, span)
            if skipped > 0:
                ev = {
                    "consumer": span.consumer,
                    "topic": span.tp[0],
                    "partition": span.tp[1],
                    "read_from_offset": span.first_offset,
                    "read_to_offset": span.last_offset,
                    "records_returned": len(span.offsets),
                    "committed_records_in_range": in_range,
                    "skipped": skipped,
                    "between_ns": [span.first_ns, span.last_ns],
                }
                out.rows.append(row(out.name, "skipped", span.first_ns, ev, weight=skipped))
    for (producer, tp), writes in ix.committed_writes.items():
        for before, w in pairwise(writes):
            assert w.item.offset is not None and before.item.offset is not None
            if w.item.offset < before.item.offset:
                ev = {
                    "producer": producer,
                    "topic": tp[0],
                    "partition": tp[1],
                    "earlier_write": {
                        "op_id": before.op.op_id,
                        "value": before.value,
                        "offset": before.item.offset,
                    },
                    "later_write": {"op_id": w.op.op_id, "value": w.value, "offset": w.item.offset},
                }
                out.rows.append(row(out.name, "producer_order", w.t, ev))
    return out
