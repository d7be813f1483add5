"""Lost write: a record of a transaction whose commit was acknowledged (or a non-transactional
write that was acknowledged) is missing from the reads although they cover it: either the
final read_committed read covered its partition, or it has a known offset below the highest
offset any read_committed reader returned in that partition, and yet no reader ever returned
it. Writes whose own send definitely failed are not expected. Count: distinct records."""

from __future__ import annotations

from ..model.facts import RunFacts
from ..model.indexes import (
    COMMITTED,
    Indexes,
)
from ..model.judged import Judged, row

NAME = "lost_write"
KINDS: tuple[str, ...] = ("lost_write",)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """A committed value that was written (its greatest write not failed) and never read,
    although the reads cover it: a final read ran in its write's partition, or its write's
    offset is below the highest offset read there.  One row per value, at its write."""
    out = Judged(NAME, KINDS)
    if not ix.has_reads:
        out.unknown = "no reads in the history, so no write can be shown lost"
        return out
    if not ix.has_final_read:
        out.notes.append("no final read: only writes below offsets that were read are checked")
    for rec in ix.records.values():
        w = rec.write
        if rec.status != COMMITTED or w is None or rec.n_r or rec.write_failed is not False:
            continue
        top, final = ix.partition_reads.get(w.item.tp, (None, None)) if w.item.tp else (None, None)
        below = w.item.offset is not None and top is not None and w.item.offset < top
        if final or below:
            ev = {
                "value": rec.value,
                "transaction": {"writer": rec.writer, "txn": rec.txn},
                "write": rec.written,
                "commit_invoked_ns": rec.commit_invoke_ns,
                "partition_max_read_offset": top,
                "final_read_covered_partition": final,
            }
            out.rows.append(row(out.name, "lost_write", w.t, ev))
    return out
