"""The dual-write tables in SQL, once for every DB-API driver: the statements differ only in
the driver's parameter marker, the integer type of ``txn`` and the collation that orders
text bytewise; each database module says those and how its driver reports errors."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from .database import ROWS_TABLE, STATE_TABLE, Database, DbRow, StoredState

_STATE_COLUMNS = "transactional_id, prepared_transaction_state, writer, txn"
_ROW_COLUMNS = "value, writer, txn, topic, partition"


class SqlDatabase(Database):
    """A :class:`Database` over one DB-API connection in autocommit mode, whose transactions
    are the explicit BEGIN ... COMMIT / ROLLBACK of the recipe."""

    #: the driver's parameter marker (``?`` or ``%s``)
    param: str = "?"
    #: the SQL type of the transaction number
    txn_type: str = "INTEGER"
    #: appended to ORDER BY on text so that rows come in bytewise order on every database
    bytewise: str = ""

    conn: Any
    _open = False

    @abstractmethod
    def _errors(self, what: str) -> AbstractContextManager[None]:
        """Turn the driver's errors during ``what`` into :class:`DatabaseError`."""

    def _in_transaction(self) -> bool:
        return self._open

    def _params(self, n: int) -> str:
        return ", ".join([self.param] * n)

    def setup(self) -> None:
        with self._errors("setup"):
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {ROWS_TABLE} (value TEXT PRIMARY KEY, "
                f"writer TEXT NOT NULL, txn {self.txn_type} NOT NULL, topic TEXT NOT NULL, "
                "partition INTEGER NOT NULL)"
            )
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (transactional_id TEXT PRIMARY KEY, "
                "prepared_transaction_state TEXT NOT NULL, writer TEXT NOT NULL, "
                f"txn {self.txn_type} NOT NULL)"
            )

    def begin(self) -> None:
        with self._errors("begin"):
            self.conn.execute("BEGIN")
        self._open = True

    def write_rows(self, rows: Sequence[DbRow]) -> None:
        with self._errors("insert"):
            cur = self.conn.cursor()
            try:
                cur.executemany(
                    f"INSERT INTO {ROWS_TABLE} ({_ROW_COLUMNS}) VALUES ({self._params(5)})",
                    [(r.value, r.writer, r.txn, r.topic, r.partition) for r in rows],
                )
            finally:
                cur.close()

    def upsert_state(self, state: StoredState) -> None:
        with self._errors("upsert"):
            self.conn.execute(
                f"INSERT INTO {STATE_TABLE} ({_STATE_COLUMNS}) VALUES ({self._params(4)}) "
                "ON CONFLICT (transactional_id) DO UPDATE SET "
                "prepared_transaction_state = excluded.prepared_transaction_state, "
                "writer = excluded.writer, txn = excluded.txn",
                (state.transactional_id, state.prepared_state, state.writer, state.txn),
            )

    def commit(self) -> None:
        self._open = False
        with self._errors("commit"):
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self._in_transaction():
            self._open = False
            with self._errors("rollback"):
                self.conn.execute("ROLLBACK")

    def read_state(self, transactional_id: str) -> StoredState | None:
        with self._errors("select"):
            found = self.conn.execute(
                f"SELECT {_STATE_COLUMNS} FROM {STATE_TABLE} WHERE transactional_id = {self.param}",
                (transactional_id,),
            ).fetchone()
        return StoredState(*found) if found else None

    def all_rows(self) -> list[DbRow]:
        return [DbRow(*r) for r in self._all(_ROW_COLUMNS, ROWS_TABLE, "value")]

    def all_states(self) -> list[StoredState]:
        return [StoredState(*r) for r in self._all(_STATE_COLUMNS, STATE_TABLE, "transactional_id")]

    def _all(self, columns: str, table: str, key: str) -> Iterator[tuple[Any, ...]]:
        with self._errors("select"):
            rows = self.conn.execute(
                f"SELECT {columns} FROM {table} ORDER BY {key}{self.bytewise}"
            ).fetchall()
        return iter(rows)

    def close(self) -> None:
        self.conn.close()
