"""The dual-write database on PostgreSQL (psycopg 3), reached by a DSN."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .database import DatabaseError
from .sql_database import SqlDatabase


def redacted(dsn: str) -> str:
    """The DSN without its password (what the run directory may show)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "(unparsable DSN)"
    parts.pop("password", None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


class PostgresDatabase(SqlDatabase):
    kind = "postgresql"
    param = "%s"
    txn_type = "BIGINT"
    bytewise = ' COLLATE "C"'

    def __init__(self, dsn: str, connect_timeout_s: int = 10) -> None:
        import psycopg

        self.dsn = dsn
        try:
            self.conn: Any = psycopg.connect(
                dsn, autocommit=True, connect_timeout=connect_timeout_s
            )
        except psycopg.Error as exc:
            raise DatabaseError(f"cannot connect to PostgreSQL {self.where}: {exc}") from exc

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
