"""Torn transaction: a read_committed reader, within one epoch (no rewind point: assign, revoke,
seek or restart), read past a committed transaction's records in a partition — its reads of
that partition began at or before the transaction's first record there and reached its last —
and returned some but not all of them (distinct records: one returned twice still leaves the
other missing). A transaction's records in a partition are its acknowledged (non-failed) writes
there whose values name it (writer|txn|index: the form a read is attributed by), placed at
their read or acked offsets. Count: distinct (reader, transaction, partition, epoch)."""

from __future__ import annotations

from collections import defaultdict

from ..model.facts import RunFacts
from ..model.indexes import (
    COMMITTED,
    Indexes,
    Read,
    Record,
    nulls_first,
)
from ..model.judged import NO_READS, Judged, row

NAME = "torn_transaction"
KINDS: tuple[str, ...] = ("torn_transaction",)


def _txn_records(ix: Indexes) -> dict[tuple[str, int, tuple[str, int]], list[Record]]:
    """Per (writer, txn, partition): the committed transaction's written, not failed records
    whose values name it (``writer|txn|index``, as reads are attributed), each placed at its
    least place (else its write's partition)."""
    out: dict[tuple[str, int, tuple[str, int]], list[Record]] = defaultdict(list)
    for rec in ix.records.values():
        if rec.status != COMMITTED or not rec.parsed or rec.txn is None or rec.writer is None:
            continue
        if rec.n_w == 0 or rec.write_failed is not False:
            continue
        tp = rec.places[0][:2] if rec.places else (rec.write.item.tp if rec.write else None)
        if tp is not None:
            out[(rec.writer, rec.txn, tp)].append(rec)
    return out


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """Within one epoch a reader returned some but not all of a committed transaction's records
    in a partition (distinct values in ``writer|txn|index`` form naming it), though its reads
    there began at or before the transaction's first record and reached its last.  Only
    transactions with more than one record in the partition, all of them located.  One row per
    (reader, transaction, partition, epoch), at the first of the transaction's records it
    returned."""
    out = Judged(NAME, KINDS)
    if not ix.has_reads:
        out.unknown = NO_READS
        return out
    expected = _txn_records(ix)
    for span in ix.spans:
        returned: dict[tuple[str, int], list[Read]] = defaultdict(list)
        for r in span.reads:
            rec = ix.records[r.obs.value]
            if rec.parsed and rec.parsed_txn is not None:
                returned[(rec.parsed_writer, rec.parsed_txn)].append(r)  # type: ignore[index]
        for (writer, txn), reads in returned.items():
            recs = expected.get((writer, txn, span.tp), [])
            offsets = [rec.places[0][2] for rec in recs if rec.places]
            if len(recs) < 2 or len(offsets) < len(recs):
                continue
            seen = {r.obs.value for r in reads}
            first, last = min(offsets), max(offsets)
            a, b = span.first_offset, span.last_offset
            if len(seen) >= len(recs) or a is None or b is None or not (a <= first and b >= last):
                continue
            ordered = sorted(reads, key=lambda r: nulls_first(r.offset, r.obs.value, r.obs.t))
            ends = [
                {"offset": r.offset, "value": r.obs.value, "t": r.obs.t}
                for r in (ordered[0], ordered[-1])
            ]
            ev = {
                "reader": span.consumer,
                "transaction": {"writer": writer, "txn": txn},
                "topic": span.tp[0],
                "partition": span.tp[1],
                "records_in_partition": len(recs),
                "records_returned": len(seen),
                "txn_offsets": [first, last],
                "reader_span": [a, b],
                "returned_first_last": [ends[0], ends[-1]],
            }
            out.rows.append(row(out.name, "torn_transaction", ordered[0].obs.t, ev))
    return out
