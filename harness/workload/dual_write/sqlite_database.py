"""The dual-write database on SQLite (stdlib, embedded): one file, shared by every writer
process of a run (WAL mode; a writer waits for another's write lock up to ``busy_timeout_s``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .database import ROWS_TABLE, STATE_TABLE, Database, DatabaseError, DbRow, StoredState


class SQLiteDatabase(Database):
    kind = "sqlite"

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

    @property
    def where(self) -> str:
        return str(self.path)

    def setup(self) -> None:
        with self._errors("setup"):
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {ROWS_TABLE} (value TEXT PRIMARY KEY, "
                "writer TEXT NOT NULL, txn INTEGER NOT NULL, topic TEXT NOT NULL, "
                "partition INTEGER NOT NULL)"
            )
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (transactional_id TEXT PRIMARY KEY, "
                "prepared_transaction_state TEXT NOT NULL, writer TEXT NOT NULL, "
                "txn INTEGER NOT NULL)"
            )

    def begin(self) -> None:
        # Deferred: the write lock is taken at the first write, just before the commit,
        # not for the whole Kafka transaction.
        with self._errors("begin"):
            self.conn.execute("BEGIN")

    def write_rows(self, rows: Sequence[DbRow]) -> None:
        with self._errors("insert"):
            self.conn.executemany(
                f"INSERT INTO {ROWS_TABLE} (value, writer, txn, topic, partition) "
                "VALUES (?, ?, ?, ?, ?)",
                [(r.value, r.writer, r.txn, r.topic, r.partition) for r in rows],
            )

    def upsert_state(self, state: StoredState) -> None:
        with self._errors("upsert"):
            self.conn.execute(
                f"INSERT INTO {STATE_TABLE} "
                "(transactional_id, prepared_transaction_state, writer, txn) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (transactional_id) DO UPDATE SET "
                "prepared_transaction_state = excluded.prepared_transaction_state, "
                "writer = excluded.writer, txn = excluded.txn",
                (state.transactional_id, state.prepared_state, state.writer, state.txn),
            )

    def commit(self) -> None:
        with self._errors("commit"):
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn.in_transaction:
            with self._errors("rollback"):
                self.conn.execute("ROLLBACK")

    def read_state(self, transactional_id: str) -> StoredState | None:
        with self._errors("select"):
            found = self.conn.execute(
                f"SELECT transactional_id, prepared_transaction_state, writer, txn "
                f"FROM {STATE_TABLE} WHERE transactional_id = ?",
                (transactional_id,),
            ).fetchone()
        return StoredState(*found) if found else None

    def all_rows(self) -> list[DbRow]:
        with self._errors("select"):
            rows = self.conn.execute(
                f"SELECT value, writer, txn, topic, partition FROM {ROWS_TABLE} ORDER BY value"
            ).fetchall()
        return [DbRow(*r) for r in rows]

    def all_states(self) -> list[StoredState]:
        with self._errors("select"):
            rows = self.conn.execute(
                f"SELECT transactional_id, prepared_transaction_state, writer, txn "
                f"FROM {STATE_TABLE} ORDER BY transactional_id"
            ).fetchall()
        return [StoredState(*r) for r in rows]

    def close(self) -> None:
        self.conn.close()
