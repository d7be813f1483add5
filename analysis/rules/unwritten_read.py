"""Unwritten read: a read (a consumer's poll, whatever its isolation, or the final read)
returned a record that no write of the history put where it was read: its value was never
sent, neither by a producer's send nor by a hostile client's probe (``never_written``); or it
was sent, but only to other partitions (``wrong_partition``; a send whose partition is not
recorded names every partition of its topic); or sent to that partition only with another key
(``wrong_key``; a key not recorded, on either side, and a probe's record, match any key). Such
a record is one the cluster made up: a torn or corrupt batch that recovery kept, a batch
decoded or rebuilt wrongly, records moved between partitions. The other checkers judge values
by the transaction that wrote them, so a record with no such write escapes them all. Count:
distinct (value, kind)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...rundir.schema import EventType as E
from ..model.facts import RunFacts
from ..model.history import Item, Op
from ..model.indexes import Indexes
from ..model.judged import Judged, row

#: why it cannot judge a history without reads
NO_READS = "no reads in the history"

NAME = "unwritten_read"
KINDS: tuple[str, ...] = ("never_written", "wrong_partition", "wrong_key")
#: the events whose items carry the records the cluster was asked to write
WRITE_TYPES = (E.SEND, E.PROBE)
READ_TYPES = (E.POLL, E.FINAL_READ)


def _read_time(op: Op) -> int:
    """A read's time: its completion, else its invocation."""
    return op.complete_ns if op.complete_ns is not None else op.invoke_ns


def _write_key(op: Op, it: Item) -> str | None:
    """The record key a write carried (a probe's item ``key`` is its kind: none recorded)."""
    return None if op.type == E.PROBE else it.key


def classify(read: Item, writes: list[tuple[Op, Item]]) -> str | None:
    """The kind of a read given its value's writes; None: some write put it there."""
    if not writes:
        return "never_written"
    here = [
        (op, it)
        for op, it in writes
        if it.topic == read.topic and (it.partition is None or it.partition == read.partition)
    ]
    if not here:
        return "wrong_partition"
    for op, it in here:
        key = _write_key(op, it)
        if key is None or read.key is None or key == read.key:
            return None
    return "wrong_key"


def _write_struct(op: Op, it: Item) -> dict[str, Any]:
    return {
        "process": op.process,
        "op_id": op.op_id,
        "type": op.type.value,
        "topic": it.topic,
        "partition": it.partition,
        "key": _write_key(op, it),
    }


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """One row per (value, kind), at the first read of that kind (by read time, process, op
    and item); evidence: the read, how many reads of the value were of that kind, and, unless
    never written, its least write (by process, op and item)."""
    out = Judged(NAME, KINDS)
    writes: dict[str, list[tuple[Op, int, Item]]] = defaultdict(list)
    reads: list[tuple[Op, int, Item]] = []
    for op in ix.ops:
        if op.type in WRITE_TYPES:
            for i, it in enumerate(op.items):
                if it.value is not None:
                    writes[it.value].append((op, i, it))
        elif op.type in READ_TYPES:
            reads += [(op, i, it) for i, it in enumerate(op.items) if it.value is not None]
    if not ix.has_reads:
        out.unknown = NO_READS
        return out
    first: dict[tuple[str, str], list[Any]] = {}
    for op, i, it in reads:
        value = it.value
        assert value is not None
        kind = classify(it, [(w, wit) for w, _, wit in writes.get(value, [])])
        if kind is None:
            continue
        order = (_read_time(op), op.process, op.op_id, i)
        entry = first.get((value, kind))
        if entry is None:
            first[(value, kind)] = [order, op, it, 1]
        else:
            entry[3] += 1
            if order < entry[0]:
                entry[0:3] = [order, op, it]
    for (value, kind), (order, op, it, n) in first.items():
        ws = writes.get(value, [])
        least = min(ws, key=lambda w: (w[0].process, w[0].op_id, w[1]), default=None)
        ev: dict[str, Any] = {
            "value": value,
            "read": {
                "process": op.process,
                "op_id": op.op_id,
                "type": op.type.value,
                "t": order[0],
                "topic": it.topic,
                "partition": it.partition,
                "offset": it.offset,
                "key": it.key,
            },
            "times_read": n,
            "written": None if least is None else _write_struct(least[0], least[2]),
        }
        out.rows.append(row(NAME, kind, order[0], ev))
    return out
