"""What every dual-write database adapter must do (run against SQLite and PostgreSQL)."""

from __future__ import annotations

from txnchaos.harness.workload.dual_write.database import Database, DbRow, StoredState


def rows(writer: str, txn: int, n: int) -> list[DbRow]:
    return [DbRow(f"{writer}|{txn}|{i}", writer, txn, "t", i % 2) for i in range(n)]


def check_contract(db: Database, other: Database) -> None:
    """``db`` and ``other``: two connections to one empty database."""
    db.setup()
    db.setup()  # idempotent
    assert db.read_state("tid") is None
    assert db.all_rows() == []

    # a committed transaction: rows and state appear together
    db.begin()
    db.write_rows(rows("w", 0, 3))
    db.upsert_state(StoredState("tid", "7:1", "w", 0))
    assert other.read_state("tid") is None  # not visible before the commit
    db.commit()
    assert other.read_state("tid") == StoredState("tid", "7:1", "w", 0)
    assert [r.value for r in other.all_rows()] == ["w|0|0", "w|0|1", "w|0|2"]

    # a rolled-back transaction leaves nothing behind, and the old state stays
    db.begin()
    db.write_rows(rows("w", 1, 2))
    db.upsert_state(StoredState("tid", "7:2", "w", 1))
    db.rollback()
    db.rollback()  # nothing open: no error
    assert other.read_state("tid") == StoredState("tid", "7:1", "w", 0)
    assert len(other.all_rows()) == 3

    # the upsert replaces the state of its transactional id only
    db.begin()
    db.write_rows(rows("w", 2, 1))
    db.upsert_state(StoredState("tid", "7:3", "w", 2))
    db.upsert_state(StoredState("other", "8:0", "v", 0))
    db.commit()
    assert [s.transactional_id for s in other.all_states()] == ["other", "tid"]
    assert other.read_state("tid") == StoredState("tid", "7:3", "w", 2)
    assert len(other.all_rows()) == 4
