"""Dual write (KIP-939): every dual-write transaction — a dual writer's ``(writer, txn)`` that
prepared (a prepare op) or has rows in the database — is in the database and in Kafka alike:
the set of its values among the committed database rows (dual_write_db.json) equals the set of
its values returned by the final read_committed read (values of the form writer|txn|index, of
a dual writer). database_only: values in the database missing from the final read;
kafka_only: values in the final read missing from the database (one row per transaction and
kind, with the counts and up to three missing values). open_prepared: a transaction still open
in the final state although recovery ran: a coordinator transaction of a dual writer's
transactional id in an active state, or a partition's open transaction whose producer id a
dual writer prepared with. Count: transactions (open_prepared: open entries)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from ...rundir.final_state import FinalState
from ...rundir.schema import EventType as E
from ..model.facts import RunFacts
from ..model.indexes import Indexes
from ..model.judged import Findings, Judged, row

NAME = "dual_write"
KINDS: tuple[str, ...] = ("database_only", "kafka_only", "open_prepared")
ACTIVE_STATES = {"Ongoing", "Prepared", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
VALUE_FORM = re.compile(r"^([^|]+)\|([0-9]+)\|([0-9]+)$")
SAMPLE = 3
NO_DB = "no database contents (dual_write_db.json): the run has no dual writers"
NO_FINAL_READ = "no final read: the database cannot be compared with Kafka"

Txn = tuple[str, int]


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """``database_only`` / ``kafka_only``: one row per transaction whose database values are
    not all read / whose read values are not all in the database, at its first prepare
    invocation. ``open_prepared``: one row per final-state entry still open."""
    ops, db, fs = ix.ops, facts.dual_write_db, facts.final_state
    out = Judged(NAME, KINDS)
    if db is None:
        out.unknown = NO_DB
        return out
    if not any(op.type == E.FINAL_READ for op in ops):
        out.unknown = NO_FINAL_READ
        return out
    prepares = [op for op in ops if op.type == E.PREPARE]
    in_db: dict[Txn, set[str]] = defaultdict(set)
    for contents in db["databases"]:
        for r in contents["rows"]:
            in_db[(r["writer"], r["txn"])].add(r["value"])
    owner_of = {v: t for t, vs in in_db.items() for v in vs}
    writers = {op.process for op in prepares} | {w for w, _ in in_db}
    in_kafka: dict[Txn, set[str]] = defaultdict(set)
    for op in ops:
        if op.type != E.FINAL_READ or not op.read_committed:
            continue
        for item in op.items:
            m = VALUE_FORM.match(item.value or "")
            if m is None or m.group(1) not in writers:
                continue
            value = m.group(0)
            in_kafka[owner_of.get(value, (m.group(1), int(m.group(2))))].add(value)
    prepare_ns: dict[Txn, int] = {}
    for op in prepares:
        if op.txn is not None:
            key = (op.process, op.txn)
            prepare_ns[key] = min(prepare_ns.get(key, op.invoke_ns), op.invoke_ns)
    txns = set(in_db) | set(in_kafka) | set(prepare_ns)
    out.checked["transactions"] = len(txns)
    for t in txns:
        d, k = in_db.get(t, set()), in_kafka.get(t, set())
        counts = {"database_rows": len(d), "final_read_records": len(k)}
        transaction = {"writer": t[0], "txn": t[1]}
        if d - k:
            ev = {
                "transaction": transaction,
                **counts,
                "missing_from_final_read": sorted(d - k)[:SAMPLE],
            }
            out.rows.append(row(NAME, "database_only", prepare_ns.get(t), ev))
        if k - d:
            ev = {
                "transaction": transaction,
                **counts,
                "missing_from_database": sorted(k - d)[:SAMPLE],
            }
            out.rows.append(row(NAME, "kafka_only", prepare_ns.get(t), ev))
    tids = {op.transactional_id for op in prepares if op.transactional_id is not None}
    pids = {op.producer_id for op in prepares if op.producer_id is not None}
    open_prepared(out, tids, pids, fs)
    return out


def open_prepared(out: Findings, tids: set[str], pids: set[int], fs: FinalState | None) -> None:
    """``open_prepared``: the final state's entries of the dual writers' transactions (their
    transactional ids ``tids``, producer ids ``pids``) still open: one row per entry (both
    engines judge the small final state with this)."""
    if fs is None:
        out.notes.append("no final state: open prepared transactions are not checked")
        return
    captured = fs.get("captured_ns")
    coordinator = fs.get("coordinator_transactions")
    for c in coordinator or []:
        if c.get("transactional_id") in tids and c.get("state") in ACTIVE_STATES:
            out.rows.append(row(NAME, "open_prepared", captured, {"coordinator": c}, as_json=False))
    for o in fs.get("open_transactions") or []:
        if o.get("producer_id") in pids:
            ev: dict[str, Any] = {"partition_state": o}
            out.rows.append(row(NAME, "open_prepared", captured, ev, as_json=False))
    if coordinator is None:
        out.notes.append(
            "the final state has no coordinator transactions: only partitions are checked"
        )
