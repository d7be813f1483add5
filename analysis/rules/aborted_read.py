"""Aborted read: a read_committed consumer (or the final read) returned a record whose
transaction aborted or never committed. A transaction is aborted when an abort was acknowledged,
its commit definitely failed, or an abort was attempted without a commit; it never committed
when no commit or abort was recorded at all (e.g. its writer crashed). Records of transactions
whose commit outcome is unknown are left to the indeterminate-commit checker. Count: distinct
records (values) so returned."""

from __future__ import annotations

from ..model.facts import RunFacts
from ..model.indexes import (
    ABORTED,
    OPEN,
    Indexes,
)
from ..model.judged import NO_READS, Judged, row

NAME = "aborted_read"
KINDS: tuple[str, ...] = ("aborted_read",)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """A value returned to a read_committed reader although its transaction aborted (abort
    acknowledged, commit definitely failed, or abort attempted without commit) or never
    committed (open).  One row per value, at its first read."""
    out = Judged(NAME, KINDS)
    if not ix.has_reads:
        out.unknown = NO_READS
        return out
    for rec in ix.records.values():
        if rec.n_r > 0 and rec.status in (ABORTED, OPEN):
            ev = {
                "value": rec.value,
                "transaction": {"writer": rec.writer, "txn": rec.txn, "status": rec.status},
                "written": rec.written,
                "first_read": rec.first_read,
                "times_read": rec.n_r,
            }
            out.rows.append(row(out.name, "aborted_read", rec.first_read_ns, ev))
    return out
