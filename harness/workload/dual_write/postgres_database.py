"""The dual-write database on PostgreSQL (psycopg 3), reached by a DSN."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .database import ROWS_TABLE, STATE_TABLE, Database, DatabaseError, DbRow, StoredState


def redacted(dsn: str) -> str:
    """The DSN without its password (what the run directory may show)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "(unparsable DSN)"
    parts.pop("password", None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


class PostgresDatabase(Database):
    kind = "postgresql"

    def __init__(self, dsn: str, connect_timeout_s: int = 10) -> None:
        import psycopg

        self.dsn = dsn
        try:
            self.conn: Any = psycopg.connect(
                dsn, autocommit=True, connect_timeout=connect_timeout_s
            )
        except psycopg.Error as exc:
            raise DatabaseError(f"cannot connect to PostgreSQL {self.where}: {exc}") from exc
        self._open = False

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            raise DatabaseError(f"postgresql {what} ({self.where}): {exc}") from exc

    @property
    def where(self) -> str:
        return redacted(self.dsn)

    def setup(self) -> None:
        with self._errors("setup"):
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {ROWS_TABLE} (value TEXT PRIMARY KEY, "
                "writer TEXT NOT NULL, txn BIGINT NOT NULL, topic TEXT NOT NULL, "
                "partition INTEGER NOT NULL)"
            )
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (transactional_id TEXT PRIMARY KEY, "
                "prepared_transaction_state TEXT NOT NULL, writer TEXT NOT NULL, "
                "txn BIGINT NOT NULL)"
            )

    def begin(self) -> None:
        with self._errors("begin"):
            self.conn.execute("BEGIN")
        self._open = True

    def write_rows(self, rows: Sequence[DbRow]) -> None:
        with self._errors("insert"), self.conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {ROWS_TABLE} (value, writer, txn, topic, partition) "
                "VALUES (%s, %s, %s, %s, %s)",
                [(r.value, r.writer, r.txn, r.topic, r.partition) for r in rows],
            )

    def upsert_state(self, state: StoredState) -> None:
        with self._errors("upsert"):
            self.conn.execute(
                f"INSERT INTO {STATE_TABLE} "
                "(transactional_id, prepared_transaction_state, writer, txn) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (transactional_id) DO UPDATE SET "
                "prepared_transaction_state = EXCLUDED.prepared_transaction_state, "
                "writer = EXCLUDED.writer, txn = EXCLUDED.txn",
                (state.transactional_id, state.prepared_state, state.writer, state.txn),
            )

    def commit(self) -> None:
        self._open = False
        with self._errors("commit"):
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self._open:
            self._open = False
            with self._errors("rollback"):
                self.conn.execute("ROLLBACK")

    def read_state(self, transactional_id: str) -> StoredState | None:
        with self._errors("select"):
            found = self.conn.execute(
                f"SELECT transactional_id, prepared_transaction_state, writer, txn "
                f"FROM {STATE_TABLE} WHERE transactional_id = %s",
                (transactional_id,),
            ).fetchone()
        return StoredState(*found) if found else None

    def all_rows(self) -> list[DbRow]:
        with self._errors("select"):
            rows = self.conn.execute(
                f"SELECT value, writer, txn, topic, partition FROM {ROWS_TABLE} "
                'ORDER BY value COLLATE "C"'
            ).fetchall()
        return [DbRow(*r) for r in rows]

    def all_states(self) -> list[StoredState]:
        with self._errors("select"):
            rows = self.conn.execute(
                f"SELECT transactional_id, prepared_transaction_state, writer, txn "
                f'FROM {STATE_TABLE} ORDER BY transactional_id COLLATE "C"'
            ).fetchall()
        return [StoredState(*r) for r in rows]

    def close(self) -> None:
        self.conn.close()
