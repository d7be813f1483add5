"""The dual-write database on SQLite (stdlib, embedded): one file, shared by every writer
process of a run (WAL mode; a writer waits for another's write lock up to ``busy_timeout_s``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .database import DatabaseError
from .sql_database import SqlDatabase


class SQLiteDatabase(SqlDatabase):
    """BEGIN is deferred: the write lock is taken at the first write, just before the commit,
    not for the whole Kafka transaction."""

    kind = "sqlite"
    param = "?"
    txn_type = "INTEGER"
    bytewise = ""  # SQLite's default collation (BINARY) is bytewise

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # isolation_level=None: no implicit transactions; BEGIN/COMMIT are ours.
            self.conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise DatabaseError(f"cannot open SQLite database {self.path}: {exc}") from exc

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise DatabaseError(f"sqlite {what} ({self.path}): {exc}") from exc

    def _in_transaction(self) -> bool:
        return self.conn.in_transaction  # also after a COMMIT that failed (busy)

    @property
    def where(self) -> str:
        return str(self.path)

    def setup(self) -> None:
        with self._errors("setup"):
            self.conn.execute("PRAGMA journal_mode=WAL")
        super().setup()
