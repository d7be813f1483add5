"""Committed offsets: after heal and quiescence, each copier group's committed offset for each
input partition is the one the history says was committed last: the offset sent with
send_offsets in the committed transaction whose commit completed last, or one sent by a
transaction whose commit outcome is unknown and was invoked after that commit; with no
committed transaction, no offset or such an unknown one. A different final offset means the
group coordinator lost a committed offset (e.g. pending transactional offsets forgotten across
a restart) or applied one that was never committed (e.g. an aborted transaction's). Groups
that also commit offsets outside transactions are not judged. Needs the groups' offsets in
final_state.json. Count: partitions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...rundir.final_state import FinalState
from ...rundir.schema import EventType as E
from ..model.facts import RunFacts
from ..model.history import Op
from ..model.indexes import COMMITTED, INDETERMINATE, Indexes, transactions
from ..model.judged import Judged, Row, row

NAME = "committed_offsets"
KINDS: tuple[str, ...] = ("committed_offset_mismatch",)
NO_FINAL = "no final state with the groups' committed offsets: they cannot be judged"


@dataclass(frozen=True)
class SentOffset:
    """One transaction's offset for one partition of a group (its greatest, if sent twice)."""

    group_id: str
    topic: str
    partition: int
    offset: int
    writer: str
    txn: int
    status: str
    commit_invoke_ns: int | None
    end_ns: int | None


def judge_offsets(
    sent: Iterable[SentOffset], plain_groups: set[str], fs: FinalState | None
) -> tuple[list[Row], str | None, int]:
    """(rows, unknown reason, partitions checked): per group and partition that some
    transaction sent offsets for (groups that also committed offsets outside transactions are
    not judged), the final committed offset must be the last committed transaction's (by the
    completion of its commit), or one an unknown-outcome transaction whose commit was invoked
    after that commit's invocation sent; with no committed transaction, none or such an
    unknown one. One row per partition that differs, at the final state's capture."""
    if fs is None or fs.get("group_offsets") is None:
        return [], NO_FINAL, 0
    final = {
        (g["group_id"], g["topic"], g["partition"]): g["offset"]
        for g in fs.get("group_offsets") or []
    }
    by_tp: dict[tuple[str, str, int], list[SentOffset]] = defaultdict(list)
    for s in sent:
        if s.group_id not in plain_groups and s.status in (COMMITTED, INDETERMINATE):
            by_tp[(s.group_id, s.topic, s.partition)].append(s)
    rows: list[Row] = []
    for key in sorted(by_tp):
        entries = by_tp[key]
        committed = [s for s in entries if s.status == COMMITTED]
        last = max(committed, key=lambda s: (s.end_ns or 0, s.writer, s.txn), default=None)
        since = -1 if last is None else (last.commit_invoke_ns or 0)
        unknown = sorted(
            {
                s.offset
                for s in entries
                if s.status == INDETERMINATE and (s.commit_invoke_ns or 0) > since
            }
        )
        allowed: set[int | None] = set(unknown)
        allowed.add(None if last is None else last.offset)
        have = final.get(key)
        if have in allowed:
            continue
        ev: dict[str, Any] = {
            "group_id": key[0],
            "topic": key[1],
            "partition": key[2],
            "final_offset": have,
            "expected_offset": None if last is None else last.offset,
            "last_committed": None if last is None else {"writer": last.writer, "txn": last.txn},
            "unknown_outcome_offsets": unknown,
        }
        rows.append(row(NAME, "committed_offset_mismatch", fs.get("captured_ns"), ev))
    return rows, None, len(by_tp)


def sent_offsets(ops: Sequence[Op]) -> tuple[list[SentOffset], set[str]]:
    """The offsets each transaction sent (greatest per partition), and the groups that
    committed offsets outside transactions."""
    txns = transactions(ops)
    best: dict[tuple[str, int, str, str, int], int] = {}
    plain: set[str] = set()
    for op in ops:
        if op.type == E.COMMIT_OFFSETS and op.group_id is not None:
            plain.add(op.group_id)
        if op.type != E.SEND_OFFSETS or op.txn is None or op.group_id is None:
            continue
        for it in op.items:
            if it.topic is None or it.partition is None or it.offset is None:
                continue
            k = (op.process, op.txn, op.group_id, it.topic, it.partition)
            best[k] = max(best.get(k, it.offset), it.offset)
    out = []
    for (writer, txn, group, topic, part), offset in best.items():
        t = txns[(writer, txn)]
        out.append(
            SentOffset(
                group, topic, part, offset, writer, txn, t.status, t.commit_invoke_ns, t.end_ns
            )
        )
    return out, plain


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """The rule over the history's ops and the final state (the Spark implementation collects
    the same :class:`SentOffset` facts and judges them with :func:`judge_offsets`)."""
    out = Judged(NAME, KINDS)
    sent, plain = sent_offsets(ix.ops)
    rows, unknown, checked = judge_offsets(sent, plain, facts.final_state)
    if unknown is not None:
        out.unknown = unknown
        return out
    out.rows = rows
    out.checked["partitions"] = checked
    return out
