"""Precommitted read: a record was returned to a read_committed reader before its
transaction's commit was even requested: the read completed before the commit operation was
invoked. Count: distinct records (values) whose first read precedes their commit's invocation."""

from __future__ import annotations

from ..model.facts import RunFacts
from ..model.indexes import (
    COMMITTED,
    INDETERMINATE,
    Indexes,
)
from ..model.judged import NO_READS, Judged, row

NAME = "precommitted_read"
KINDS: tuple[str, ...] = ("precommitted_read",)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """A value of a committed (or unknown-outcome) transaction first returned to a reader
    before that transaction's commit was invoked.  One row per value, at its first read."""
    out = Judged(NAME, KINDS)
    if not ix.has_reads:
        out.unknown = NO_READS
        return out
    for rec in ix.records.values():
        first, commit = rec.first_read_ns, rec.commit_invoke_ns
        if rec.status not in (COMMITTED, INDETERMINATE) or first is None or commit is None:
            continue
        if first < commit:
            ev = {
                "value": rec.value,
                "transaction": {"writer": rec.writer, "txn": rec.txn},
                "first_read": rec.first_read,
                "commit_invoked_ns": commit,
                "read_early_by_ms": (commit - first) / 1e6,
            }
            out.rows.append(row(out.name, "precommitted_read", first, ev))
    return out
