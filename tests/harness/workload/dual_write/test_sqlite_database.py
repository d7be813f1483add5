"""The SQLite adapter of the dual-write workload (the default database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.harness.workload.dual_write.connect import open_database
from txnchaos.harness.workload.dual_write.database import DatabaseError, DbRow
from txnchaos.harness.workload.dual_write.spec import DatabaseSpec
from txnchaos.harness.workload.dual_write.sqlite_database import SQLiteDatabase

from .db_contract import check_contract, rows


def test_sqlite_keeps_the_contract(tmp_path: Path) -> None:
    db, other = SQLiteDatabase(tmp_path / "db.sqlite"), SQLiteDatabase(tmp_path / "db.sqlite")
    try:
        check_contract(db, other)
    finally:
        db.close()
        other.close()


def test_a_duplicate_row_fails_the_transaction(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "db.sqlite")
    db.setup()
    db.begin()
    with pytest.raises(DatabaseError, match="UNIQUE"):
        db.write_rows([*rows("w", 0, 1), DbRow("w|0|0", "w", 0, "t", 0)])
    db.rollback()
    assert db.all_rows() == []
    db.close()


def test_the_default_database_is_a_file_in_the_run_directory(tmp_path: Path) -> None:
    db = open_database(DatabaseSpec(), tmp_path)
    try:
        assert db.kind == "sqlite"
        assert db.where == str(tmp_path / "dual_write.sqlite")
        assert (tmp_path / "dual_write.sqlite").exists()
    finally:
        db.close()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "postgresql"}, "needs a dsn"),
        ({"kind": "sqlite", "dsn": "host=x"}, "only for kind postgresql"),
        ({"kind": "mysql"}, "sqlite"),
        ({"path": ""}, "at least 1 character"),
    ],
)
def test_bad_database_specs_are_refused(spec: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DatabaseSpec.model_validate(spec)


def test_a_dual_writer_entry_names_its_bad_database() -> None:
    from txnchaos.harness.workload.config import WorkloadConfigError, load_workload

    user = {"kind": "dual_writer", "topics": ["t"], "database": {"kind": "postgresql"}}
    with pytest.raises(WorkloadConfigError, match=r"users\.0\.dual_writer\.database: dsn"):
        load_workload({"topics": [{"name": "t", "partitions": 2}], "users": [user]})
