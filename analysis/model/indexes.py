"""Named indexes over a history, each computed once (Jepsen style): transaction outcome by
transaction, observations of each record value, what each place in the log was seen holding,
and each consumer's reads per partition cut into epochs.  The rules (rules.py) are short pure
functions over these.

Vocabulary (the same as projections.py, which computes these as Spark projections):

* an **observation** of a value is a read_committed read of it (poll or final_read; a null
  isolation counts as read_committed) or a send of it (its *write*, whatever its outcome);
* a **place** is (topic, partition, offset); an observation without all three has none;
* a transaction ``(writer, txn)`` has a **status**: committed (a commit acknowledged), aborted
  (an abort acknowledged, or the commit definitely failed, or an abort attempted without a
  commit), indeterminate (a commit of unknown outcome), open (none of these);
* a value's transaction is parsed from it (``writer|txn|index``), else it is its write's;
  a value of no transaction (``writer|-|index``, or an unparsed value whose write had no txn)
  takes its status from its write's outcome (ok committed, info indeterminate, fail aborted);
  a value whose transaction left no trace is ``unknown``;
* an **epoch** of a consumer in a partition: its reads between two rewind points (an assign,
  revoke or seek item of that partition, or a ``start`` of the process).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ...rundir.schema import EventType, Outcome
from .history import TP, Item, Op, Place

E = EventType
COMMITTED, ABORTED, INDETERMINATE, OPEN, UNKNOWN = (
    "committed",
    "aborted",
    "indeterminate",
    "open",
    "unknown",
)
#: order of the statuses when a value's places disagree (the greatest wins, as in Spark)
STATUS_RANK = {COMMITTED: 1, ABORTED: 2, INDETERMINATE: 3, OPEN: 4}
#: a write of no transaction: status from its own outcome
PLAIN_STATUS = {Outcome.OK: COMMITTED, Outcome.INFO: INDETERMINATE, Outcome.FAIL: ABORTED}
TXN_TYPES = (E.BEGIN, E.SEND, E.SEND_OFFSETS, E.COMMIT, E.ABORT)
REWIND_ITEM_TYPES = (E.ASSIGN, E.REVOKE, E.SEEK)
READ, WRITE = "r", "w"
_LONG = re.compile(r"[+-]?[0-9]+")


def parse_txn(s: str) -> int | None:
    """A transaction number as Spark's ``try_cast(long)`` reads it: ASCII digits with an
    optional sign, surrounding whitespace and control characters ignored, in the long range."""
    i, j = 0, len(s)
    while i < j and ord(s[i]) <= 32:
        i += 1
    while j > i and ord(s[j - 1]) <= 32:
        j -= 1
    core = s[i:j]
    if not _LONG.fullmatch(core):
        return None
    n = int(core)
    return n if -(1 << 63) <= n < 1 << 63 else None


def parse_value(value: str) -> tuple[str | None, int | None, bool]:
    """(writer, txn, parsed): ``parsed`` when the value holds exactly two ``|``; txn is null
    for ``-`` or a non-number."""
    parts = value.split("|")
    if len(parts) != 3:
        return None, None, False
    return parts[0], None if parts[1] == "-" else parse_txn(parts[1]), True


def nulls_first(*xs: Any) -> tuple[Any, ...]:
    """A sort key ordering like a Spark struct: field by field, nulls first."""
    return tuple((0, 0) if x is None else (1, x) for x in xs)


# -- transactions -------------------------------------------------------------------------


@dataclass
class Txn:
    """What the history says of one transaction ``(writer, txn)``."""

    commit_invoke_ns: int | None = None
    commit_ok: bool = False
    commit_info: bool = False
    commit_fail: bool = False
    abort_ok: bool = False
    abort_any: bool = False
    #: history rows (one per item) of its sends, and of its acknowledged sends
    n_sends: int = 0
    n_acked: int = 0
    has_offsets: bool = False
    begin_ns: int | None = None  #: its first op's invocation
    end_ns: int | None = None  #: its last commit or abort's completion

    @property
    def status(self) -> str:
        if self.commit_ok:
            return COMMITTED
        if self.abort_ok:
            return ABORTED
        if self.commit_info:
            return INDETERMINATE
        if self.commit_fail or self.abort_any:
            return ABORTED
        return OPEN


def transactions(ops: Iterable[Op]) -> dict[tuple[str, int], Txn]:
    """Transaction outcome by ``(process, txn)``, from its begin/send/send_offsets/commit/abort."""
    out: dict[tuple[str, int], Txn] = {}
    for op in ops:
        if op.txn is None or op.type not in TXN_TYPES:
            continue
        t = out.setdefault((op.process, op.txn), Txn())
        if t.begin_ns is None or op.invoke_ns < t.begin_ns:
            t.begin_ns = op.invoke_ns
        if op.type in (E.COMMIT, E.ABORT) and op.complete_ns is not None:
            t.end_ns = op.complete_ns if t.end_ns is None else max(t.end_ns, op.complete_ns)
        if op.type == E.SEND:
            t.n_sends += max(1, len(op.items))
            t.n_acked += max(1, len(op.items)) if op.outcome == Outcome.OK else 0
        t.has_offsets |= op.type == E.SEND_OFFSETS
        if op.type == E.COMMIT:
            if t.commit_invoke_ns is None or op.invoke_ns < t.commit_invoke_ns:
                t.commit_invoke_ns = op.invoke_ns
            t.commit_ok |= op.outcome == Outcome.OK
            t.commit_info |= op.outcome == Outcome.INFO
            t.commit_fail |= op.outcome == Outcome.FAIL
        elif op.type == E.ABORT:
            t.abort_ok |= op.outcome == Outcome.OK
            t.abort_any = True
    return out


# -- observations of values -----------------------------------------------------------------


@dataclass(frozen=True)
class Obs:
    """One observation of a value: item ``index`` of ``op``, a read (``r``) or a write (``w``)."""

    role: str
    op: Op
    index: int
    item: Item

    @property
    def value(self) -> str:
        assert self.item.value is not None
        return self.item.value

    @property
    def t(self) -> int:
        """A write's time is its invocation; a read's its completion (else invocation)."""
        if self.role == WRITE or self.op.complete_ns is None:
            return self.op.invoke_ns
        return self.op.complete_ns

    @property
    def order(self) -> tuple[str, str, int]:
        """(role, process, op_id): reads before writes."""
        return self.role, self.op.process, self.op.op_id

    @property
    def is_final(self) -> bool:
        return self.op.type == E.FINAL_READ


def observations(ops: Iterable[Op]) -> list[Obs]:
    """Every send of a value (a write) and every read_committed read of one (a read)."""
    out = []
    for op in ops:
        if op.type == E.SEND:
            role = WRITE
        elif op.type in (E.POLL, E.FINAL_READ) and op.read_committed:
            role = READ
        else:
            continue
        out += [Obs(role, op, i, it) for i, it in enumerate(op.items) if it.value is not None]
    return out


def greatest_write(writes: Sequence[Obs]) -> Obs | None:
    """The write the analysis attributes a value to: the greatest by (process, op_id)."""
    return max(writes, key=lambda o: (o.op.process, o.op.op_id, o.index), default=None)


@dataclass
class Placement:
    """The observations of one value at one place (or with no place)."""

    value: str
    place: Place | None
    obs: list[Obs] = field(default_factory=list)
    #: set by :class:`Record`: the transaction the value at this place belongs to
    txn: Txn | None = None
    plain: bool = False  #: a write of no transaction, status from its outcome

    @cached_property
    def writes(self) -> list[Obs]:
        return [o for o in self.obs if o.role == WRITE]

    @cached_property
    def reads(self) -> list[Obs]:
        return [o for o in self.obs if o.role == READ]

    @cached_property
    def lo(self) -> Obs:
        """The least observation (reads first, then by process, op_id)."""
        return min(self.obs, key=lambda o: (o.order, o.t))

    @cached_property
    def hi(self) -> Obs:
        return max(self.obs, key=lambda o: (o.order, o.t))

    @property
    def committed(self) -> bool:
        """Known to hold a committed record: read, or written by a committed transaction (or
        acknowledged without one)."""
        if self.reads:
            return True
        if not self.writes:
            return False
        if self.txn is not None and self.txn.status == COMMITTED:
            return True
        return self.plain and any(o.op.outcome == Outcome.OK for o in self.writes)


class Record:
    """Everything observed of one value: its observations by place, its greatest write, its
    transaction ``(writer, txn)`` and that transaction's ``status`` and ``commit_invoke_ns``.

    A value naming its transaction has it at every place; one that does not is attributed, at
    each place, to the greatest write there (its status: the greatest of those places', in the
    order committed < aborted < indeterminate < open)."""

    def __init__(self, value: str, obs: list[Obs], txns: dict[tuple[str, int], Txn]) -> None:
        self.value = value
        self.obs = obs
        self.parsed_writer, self.parsed_txn, self.parsed = parse_value(value)
        by_place: dict[Place | None, Placement] = {}
        for o in obs:
            by_place.setdefault(o.item.place, Placement(value, o.item.place)).obs.append(o)
        for p in by_place.values():
            writer, txn = self._txn_of(greatest_write(p.writes))
            p.txn = None if writer is None or txn is None else txns.get((writer, txn))
            p.plain = txn is None and self.parsed
        self.placements = by_place
        self.write = greatest_write([o for o in obs if o.role == WRITE])
        self.writer, self.txn = self._txn_of(self.write)
        statuses = [p.txn.status for p in by_place.values() if p.txn is not None]
        commits = [p.txn.commit_invoke_ns for p in by_place.values() if p.txn is not None]
        self.commit_invoke_ns = max((c for c in commits if c is not None), default=None)
        if statuses:
            self.status = max(statuses, key=STATUS_RANK.__getitem__)
        elif self.txn is None and self.write is not None:
            outcome = self.write.op.outcome
            self.status = PLAIN_STATUS.get(outcome, UNKNOWN) if outcome else UNKNOWN
        else:
            self.status = UNKNOWN

    def _txn_of(self, write: Obs | None) -> tuple[str | None, int | None]:
        """(writer, txn): parsed from the value, else the given write's process and txn."""
        if self.parsed:
            return self.parsed_writer, self.parsed_txn
        return (None, None) if write is None else (write.op.process, write.op.txn)

    @cached_property
    def reads(self) -> list[Obs]:
        return [o for o in self.obs if o.role == READ]

    @property
    def n_w(self) -> int:
        return len(self.obs) - len(self.reads)

    @property
    def n_r(self) -> int:
        return len(self.reads)

    @property
    def n_final(self) -> int:
        return sum(o.is_final for o in self.reads)

    @property
    def first_read_ns(self) -> int | None:
        return min((o.t for o in self.reads), default=None)

    @property
    def write_failed(self) -> bool | None:
        """Whether its greatest write definitely failed (None: no write, or no outcome)."""
        if self.write is None or self.write.op.outcome is None:
            return None
        return self.write.op.outcome == Outcome.FAIL

    @cached_property
    def places(self) -> list[Place]:
        return sorted(p for p in self.placements if p is not None)

    # evidence structs, as the Spark checkers show them

    @cached_property
    def written(self) -> dict[str, Any] | None:
        """Its greatest write, by (process, op_id, t, outcome, topic, ...)."""
        structs = [write_struct(o) for o in self.obs if o.role == WRITE]
        return max(structs, key=lambda s: nulls_first(*s.values()), default=None)

    @cached_property
    def first_read(self) -> dict[str, Any] | None:
        structs = [read_struct(o) for o in self.reads]
        return min(structs, key=lambda s: nulls_first(*s.values()), default=None)

    @cached_property
    def loc_min(self) -> dict[str, Any] | None:
        """Its least observation with an offset, by (topic, partition, offset, role, ...)."""
        structs = [place_struct(o) for o in self.obs if o.item.offset is not None]
        return min(structs, key=lambda s: nulls_first(*s.values()), default=None)


def write_struct(o: Obs) -> dict[str, Any]:
    op, it = o.op, o.item
    return {
        "process": op.process,
        "op_id": op.op_id,
        "t": o.t,
        "outcome": None if op.outcome is None else op.outcome.value,
        "topic": it.topic,
        "partition": it.partition,
        "offset": it.offset,
        "source": it.source,
        "group_id": op.group_id,
        "producer_id": op.producer_id,
    }


def read_struct(o: Obs) -> dict[str, Any]:
    op, it = o.op, o.item
    return {
        "t": o.t,
        "process": op.process,
        "op_id": op.op_id,
        "type": op.type.value,
        "topic": it.topic,
        "partition": it.partition,
        "offset": it.offset,
    }


def place_struct(o: Obs) -> dict[str, Any]:
    it = o.item
    return {
        "topic": it.topic,
        "partition": it.partition,
        "offset": it.offset,
        "role": o.role,
        "process": o.op.process,
        "op_id": o.op.op_id,
        "t": o.t,
    }


def observation_struct(o: Obs) -> dict[str, Any]:
    return {
        "value": o.value,
        "role": o.role,
        "process": o.op.process,
        "op_id": o.op.op_id,
        "t": o.t,
    }


# -- consumers' reads per partition -----------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """A read_committed read of a value by ``consumer`` in partition ``tp``, in its epoch."""

    consumer: str
    tp: TP
    epoch: int
    obs: Obs

    @property
    def offset(self) -> int | None:
        return self.obs.item.offset

    @property
    def order(self) -> tuple[int, int]:
        return self.obs.op.op_id, self.obs.index


@dataclass
class Span:
    """One consumer's reads of one partition in one epoch, in op order (facts about them are
    computed once the reads are all in)."""

    consumer: str
    tp: TP
    epoch: int
    reads: list[Read] = field(default_factory=list)

    @cached_property
    def offsets(self) -> frozenset[int]:
        return frozenset(r.offset for r in self.reads if r.offset is not None)

    @cached_property
    def first_offset(self) -> int | None:
        return min(self.offsets, default=None)

    @cached_property
    def last_offset(self) -> int | None:
        return max(self.offsets, default=None)

    @property
    def first_ns(self) -> int:
        return min(r.obs.t for r in self.reads)

    @property
    def last_ns(self) -> int:
        return max(r.obs.t for r in self.reads)


def consumer_reads(ops: Iterable[Op]) -> dict[tuple[str, TP], list[Read]]:
    """Per (consumer, partition): its reads in op order, each with its epoch (rewind items of
    that partition so far, plus ``start`` ops of the process before it).  Reads without a
    topic and partition belong to no partition and are left out."""
    by_proc: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_proc[op.process].append(op)
    out: dict[tuple[str, TP], list[Read]] = defaultdict(list)
    for proc, proc_ops in by_proc.items():
        rewinds: dict[TP, int] = defaultdict(int)
        starts = 0
        for op in sorted(proc_ops, key=lambda o: o.op_id):
            if op.type == E.START:
                starts += 1
            elif op.type in REWIND_ITEM_TYPES:
                for it in op.items:
                    if it.tp is not None:
                        rewinds[it.tp] += 1
            elif op.type in (E.POLL, E.FINAL_READ) and op.read_committed:
                for i, it in enumerate(op.items):
                    if it.value is not None and it.tp is not None:
                        epoch = rewinds[it.tp] + starts
                        out[(proc, it.tp)].append(Read(proc, it.tp, epoch, Obs(READ, op, i, it)))
    return dict(out)


# -- all indexes --------------------------------------------------------------------------


class Indexes:
    """The indexes of one history, each computed on first use."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops

    @cached_property
    def ops_by_type(self) -> dict[EventType, int]:
        counts: dict[EventType, int] = defaultdict(int)
        for op in self.ops:
            counts[op.type] += 1
        return dict(counts)

    @property
    def has_reads(self) -> bool:
        """Any poll or final_read op (whatever its isolation or items)."""
        return bool(self.ops_by_type.get(E.POLL) or self.ops_by_type.get(E.FINAL_READ))

    @property
    def has_final_read(self) -> bool:
        return bool(self.ops_by_type.get(E.FINAL_READ))

    @cached_property
    def txns(self) -> dict[tuple[str, int], Txn]:
        """Transaction outcome by (writer process, txn)."""
        return transactions(self.ops)

    @cached_property
    def records(self) -> dict[str, Record]:
        """Record by value: every observation of each value."""
        by_value: dict[str, list[Obs]] = defaultdict(list)
        for o in observations(self.ops):
            by_value[o.value].append(o)
        return {v: Record(v, obs, self.txns) for v, obs in by_value.items()}

    @cached_property
    def values_at(self) -> dict[Place, list[Placement]]:
        """Per place: the values observed there."""
        out: dict[Place, list[Placement]] = defaultdict(list)
        for rec in self.records.values():
            for place, p in rec.placements.items():
                if place is not None:
                    out[place].append(p)
        return dict(out)

    @cached_property
    def committed_offsets(self) -> dict[TP, set[int]]:
        """Per partition: offsets known to hold a committed record."""
        out: dict[TP, set[int]] = defaultdict(set)
        for (topic, part, off), ps in self.values_at.items():
            if any(p.committed for p in ps):
                out[(topic, part)].add(off)
        return dict(out)

    @cached_property
    def reads(self) -> dict[tuple[str, TP], list[Read]]:
        """Per (consumer, partition): its reads in op order, with epochs."""
        return consumer_reads(self.ops)

    @cached_property
    def spans(self) -> list[Span]:
        """Per (consumer, partition, epoch): the reads."""
        out: dict[tuple[str, TP, int], Span] = {}
        for (proc, tp), reads in self.reads.items():
            for r in reads:
                out.setdefault((proc, tp, r.epoch), Span(proc, tp, r.epoch)).reads.append(r)
        return list(out.values())

    @cached_property
    def partition_reads(self) -> dict[TP, tuple[int | None, bool]]:
        """Per partition: the highest offset any read returned, and whether a final read ran."""
        out: dict[TP, tuple[int | None, bool]] = {}
        for (_, tp), reads in self.reads.items():
            top, final = out.get(tp, (None, False))
            for r in reads:
                if r.offset is not None and (top is None or r.offset > top):
                    top = r.offset
                final = final or r.obs.is_final
            out[tp] = (top, final)
        return out

    @cached_property
    def committed_writes(self) -> dict[tuple[str, TP], list[Obs]]:
        """Per (producer, partition): its sends with an offset in its own committed
        transactions, in op order."""
        out: dict[tuple[str, TP], list[Obs]] = defaultdict(list)
        for op in sorted(self.ops, key=lambda o: (o.process, o.op_id)):
            if op.type != E.SEND or op.txn is None:
                continue
            t = self.txns.get((op.process, op.txn))
            if t is None or t.status != COMMITTED:
                continue
            for i, it in enumerate(op.items):
                if it.value is not None and it.offset is not None and it.tp is not None:
                    out[(op.process, it.tp)].append(Obs(WRITE, op, i, it))
        return dict(out)

    @cached_property
    def topics(self) -> set[str]:
        """Topics with a partition somewhere in the history."""
        return {it.tp[0] for op in self.ops for it in op.items if it.tp is not None}
