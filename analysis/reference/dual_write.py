"""Dual write: the reference of analysis/checkers/dual_write.py (its docstring states the rule):
per dual-write transaction, its values in the database equal its values in the final
read_committed read; and no dual writer's transaction is open in the final state."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...rundir.dual_write_db import DualWriteDb
from ...rundir.final_state import FinalState
from ...rundir.schema import EventType as E
from .history import Op
from .rows import Judged, row

NAME = "dual_write"
KINDS = ("database_only", "kafka_only", "open_prepared")
ACTIVE_STATES = {"Ongoing", "Prepared", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
VALUE_FORM = re.compile(r"^([^|]+)\|([0-9]+)\|([0-9]+)$")
SAMPLE = 3

Txn = tuple[str, int]


def dual_write(ops: Sequence[Op], db: DualWriteDb | None, fs: FinalState | None) -> Judged:
    """``database_only`` / ``kafka_only``: one row per transaction whose database values are
    not all read / whose read values are not all in the database, at its first prepare
    invocation. ``open_prepared``: one row per final-state entry still open."""
    out = Judged(NAME, KINDS)
    if db is None:
        out.unknown = "no database contents (dual_write_db.json): the run has no dual writers"
        return out
    if not any(op.type == E.FINAL_READ for op in ops):
        out.unknown = "no final read: the database cannot be compared with Kafka"
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
    _open_prepared(out, prepares, fs)
    return out


def _open_prepared(out: Judged, prepares: list[Op], fs: FinalState | None) -> None:
    if fs is None:
        out.notes.append("no final state: open prepared transactions are not checked")
        return
    tids = {op.transactional_id for op in prepares if op.transactional_id is not None}
    pids = {op.producer_id for op in prepares if op.producer_id is not None}
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
