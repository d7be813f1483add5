"""Open the database a :class:`~.spec.DatabaseSpec` names (tables created if missing)."""

from __future__ import annotations

from pathlib import Path

from .database import Database
from .spec import DatabaseSpec


def open_database(spec: DatabaseSpec, run_dir: Path) -> Database:
    db: Database
    if spec.kind == "postgresql":
        from .postgres_database import PostgresDatabase

        assert spec.dsn is not None
        db = PostgresDatabase(spec.dsn)
    else:
        from .sqlite_database import SQLiteDatabase

        db = SQLiteDatabase(spec.sqlite_path(run_dir))
    try:
        db.setup()
    except Exception:
        db.close()
        raise
    return db
