"""Indeterminate commits: a transaction whose commit has an unknown outcome (``info``: timed out,
connection lost, crash) must be wholly visible or wholly invisible in the final read: of its
acknowledged (non-failed) writes, either all or none are returned by the final read_committed
read. Count: transactions partly visible. Also reported: how many resolved each way."""

from __future__ import annotations

from collections import defaultdict

from ..model.facts import RunFacts
from ..model.indexes import (
    INDETERMINATE,
    Indexes,
    Record,
)
from ..model.judged import Judged, row

NAME = "indeterminate_commit"
KINDS: tuple[str, ...] = ("partly_visible",)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """A transaction whose commit outcome is unknown must be wholly visible or wholly
    invisible in the final read: of its written, not failed records, some but not all finally
    read is an anomaly.  One row per transaction, at its commit's invocation."""
    out = Judged(NAME, KINDS)
    if not ix.has_final_read:
        out.unknown = "no final read: visibility of unknown-outcome commits cannot be judged"
        return out
    by_txn: dict[tuple[str | None, int], list[Record]] = defaultdict(list)
    for rec in ix.records.values():
        if (
            rec.status == INDETERMINATE
            and rec.txn is not None
            and rec.n_w
            and rec.write_failed is False
        ):
            by_txn[(rec.writer, rec.txn)].append(rec)
    for (writer, txn), recs in by_txn.items():
        visible = sorted(r.value for r in recs if r.n_final > 0)
        invisible = sorted(r.value for r in recs if r.n_final == 0)
        if not visible or not invisible:
            continue
        commit = min(
            (r.commit_invoke_ns for r in recs if r.commit_invoke_ns is not None), default=None
        )
        ev = {
            "transaction": {"writer": writer, "txn": txn},
            "commit_invoked_ns": commit,
            "writes": len(recs),
            "visible_in_final_read": len(visible),
            "visible_sample": visible[:3],
            "invisible_sample": invisible[:3],
        }
        out.rows.append(row(out.name, "partly_visible", commit, ev))
    return out
