"""What the dual-write recipe needs from a database, whichever one it is.

Two tables: the rows a transaction writes (one per Kafka record, keyed by the record's
value), and the seed's ``kafka_transaction_state`` mapping transactional id -> prepared
transaction state, here with the writer and transaction number of that state so that a
recovery can name the transaction it completes in the history.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

ROWS_TABLE = "dual_write_rows"
STATE_TABLE = "kafka_transaction_state"


class DatabaseError(RuntimeError):
    """The database failed or refused an operation (the transaction did not commit)."""


@dataclass(frozen=True)
class DbRow:
    """One row: the Kafka record it mirrors (its value is unique in the run)."""

    value: str
    writer: str
    txn: int
    topic: str
    partition: int


@dataclass(frozen=True)
class StoredState:
    """A transactional id's last prepared transaction state, committed with its rows."""

    transactional_id: str
    prepared_state: str
    writer: str
    txn: int


class Database(ABC):
    """One connection; one transaction at a time (``begin`` ... ``commit`` / ``rollback``)."""

    #: ``sqlite`` or ``postgresql`` (what the captured contents say they came from).
    kind: str = ""

    @abstractmethod
    def setup(self) -> None:
        """Create the two tables if they do not exist (safe to call from every writer)."""

    @abstractmethod
    def begin(self) -> None: ...

    @abstractmethod
    def write_rows(self, rows: Sequence[DbRow]) -> None: ...

    @abstractmethod
    def upsert_state(self, state: StoredState) -> None:
        """Insert or replace the transactional id's prepared state."""

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def rollback(self) -> None:
        """Undo the open transaction (nothing happens if none is open)."""

    @abstractmethod
    def read_state(self, transactional_id: str) -> StoredState | None:
        """The committed state of ``transactional_id`` (None: it never committed one)."""

    @abstractmethod
    def all_rows(self) -> list[DbRow]:
        """Every committed row, ordered by value."""

    @abstractmethod
    def all_states(self) -> list[StoredState]:
        """Every committed state, ordered by transactional id."""

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def where(self) -> str:
        """Where the data lives (a file path, or the DSN without its password)."""
