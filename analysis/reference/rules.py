"""The history checkers' rules, one pure function each over the indexes (indexes.py).

Each function is the readable specification of the Spark checker of the same name in
analysis/checkers/: it returns the same anomaly rows (tests/analysis/test_reference_agrees.py
holds them to that).  The docstrings state the rules; the Spark checkers' module docstrings say
the same in their words.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from .indexes import (
    ABORTED,
    COMMITTED,
    INDETERMINATE,
    OPEN,
    E,
    Indexes,
    Read,
    Record,
    Span,
    nulls_first,
    observation_struct,
    place_struct,
)
from .rows import Judged, row

NO_READS = "no read_committed reads in the history"


def aborted_read(ix: Indexes) -> Judged:
    """A value returned to a read_committed reader although its transaction aborted (abort
    acknowledged, commit definitely failed, or abort attempted without commit) or never
    committed (open).  One row per value, at its first read."""
    out = Judged("aborted_read", ("aborted_read",))
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


def precommitted_read(ix: Indexes) -> Judged:
    """A value of a committed (or unknown-outcome) transaction first returned to a reader
    before that transaction's commit was invoked.  One row per value, at its first read."""
    out = Judged("precommitted_read", ("precommitted_read",))
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


def lost_write(ix: Indexes) -> Judged:
    """A committed value that was written (its greatest write not failed) and never read,
    although the reads cover it: a final read ran in its write's partition, or its write's
    offset is below the highest offset read there.  One row per value, at its write."""
    out = Judged("lost_write", ("lost_write",))
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


def _returned(r: Read) -> dict[str, object]:
    return {"t": r.obs.t, "op_id": r.obs.op.op_id, "offset": r.offset}


def duplicate(ix: Indexes) -> Judged:
    """(a) multiple_offsets: a value observed at more than one place (one row per value;
    evidence: the least observation at its least place and the greatest at its greatest, the
    row at the earlier of the two); (b) redelivered: a value returned more than
    once to one consumer in one partition within one epoch (one row per (consumer, partition,
    epoch, value), at its last return)."""
    out = Judged("duplicate", ("multiple_offsets", "redelivered"))
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


def inconsistent_offsets(ix: Indexes) -> Judged:
    """A place observed holding more than one value (across acks and reads).  One row per
    place; evidence: the least value's least observation and the greatest's greatest."""
    out = Judged("inconsistent_offsets", ("inconsistent_offset",))
    for (topic, part, off), ps in ix.values_at.items():
        if len(ps) < 2:
            continue
        lo = min(ps, key=lambda p: (p.value, p.lo.order)).lo
        hi = max(ps, key=lambda p: (p.value, p.hi.order)).hi
        ev = {
            "topic": topic,
            "partition": part,
            "offset": off,
            "observations": [observation_struct(lo), observation_struct(hi)],
        }
        out.rows.append(row(out.name, "inconsistent_offset", min(lo.t, hi.t), ev))
    return out


def skipped_in(ix: Indexes, span: Span) -> tuple[int, int]:
    """(committed offsets between the span's first and last offset, how many it did not
    return)."""
    a, b = span.first_offset, span.last_offset
    if a is None or b is None:
        return 0, 0
    committed = [o for o in ix.committed_offsets.get(span.tp, ()) if a <= o <= b]
    return len(committed), len(set(committed) - span.offsets)


def ordering(ix: Indexes) -> Judged:
    """(a) non_monotonic: a read not above the previous read of the same consumer, partition
    and epoch (one row per read); (b) skipped: within an epoch, committed offsets between the
    first and last offset read that were not returned (one row per epoch, weight: how many);
    (c) producer_order: a producer's committed write to a partition acked below its previous
    committed write there (one row per such write)."""
    out = Judged("ordering", ("non_monotonic", "skipped", "producer_order"))
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


def torn_transaction(ix: Indexes) -> Judged:
    """Within one epoch a reader returned some but not all of a committed transaction's records
    in a partition (distinct values in ``writer|txn|index`` form naming it), though its reads
    there began at or before the transaction's first record and reached its last.  Only
    transactions with more than one record in the partition, all of them located.  One row per
    (reader, transaction, partition, epoch), at the first of the transaction's records it
    returned."""
    out = Judged("torn_transaction", ("torn_transaction",))
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


def indeterminate_commit(ix: Indexes) -> Judged:
    """A transaction whose commit outcome is unknown must be wholly visible or wholly
    invisible in the final read: of its written, not failed records, some but not all finally
    read is an anomaly.  One row per transaction, at its commit's invocation."""
    out = Judged("indeterminate_commit", ("partly_visible",))
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


def consume_transform_produce(ix: Indexes) -> Judged:
    """For each copier group and each input record in the final read (at its least place) in a
    partition the group committed a position for: below the position it has exactly one output
    in the final read (a finally read value whose write names the group and the input as its
    source); at or above it, none.  Kinds: missing_output (below, none), duplicate_output (more
    than one), output_ahead_of_offsets (at or above, some); an input can be two of them.  One
    row per (group, input, kind), at the input's first read."""
    kinds = ("missing_output", "duplicate_output", "output_ahead_of_offsets")
    out = Judged("consume_transform_produce", kinds)
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
            for kind in kinds:
                if found[kind]:
                    out.rows.append(row(out.name, kind, rec.first_read_ns, ev))
    return out
