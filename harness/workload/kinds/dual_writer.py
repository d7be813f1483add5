"""dual_writer: KIP-939's dual-write recipe on our own client. Each transaction writes its
records to Kafka and one row per record to a database (SQLite by default, or PostgreSQL),
atomically: the prepared Kafka transaction's state commits with the rows, and recovery
(at start, after an unknown outcome, and after a crash) completes the kept transaction with
the state the database holds."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from pydantic import Field, field_validator

from ....rundir.schema import encode_value
from ..clients import ClientError, ProducerReset, chance
from ..dual_write.database import Database, DatabaseError, DbRow, StoredState
from ..dual_write.spec import DatabaseSpec
from ..recording import Reporter
from ..spec import TransactionVersion
from ..workers import FLUSH_TIMEOUT_S, WorkerContext, hold_forever
from .kind import UserKind
from .transactional_producer import TransactionalProducerSpec, TransactionalProducerWorker

if TYPE_CHECKING:
    from ....rundir.writer import HistoryWriter
    from ..config import WorkloadConfig
    from ..dual_write.two_phase_client import TwoPhaseProducerClient

#: Crash hold points (:mod:`..crashable`): the transaction is prepared and its rows written,
#: the database commit not done; or the database committed and the Kafka commit not called.
AFTER_PREPARE = "after-prepare"
AFTER_DB_COMMIT = "after-db-commit"


class DualWriterSpec(TransactionalProducerSpec):
    """A ``transactional_producer`` whose transactions also write rows to a database, with
    KIP-939 two-phase commit (needs the cluster setting transaction.two.phase.commit.enable).
    ``abort_probability``: transactions abandoned before prepare (database rolled back,
    Kafka aborted); ``transaction_timeout_ms`` cannot be set (2PC transactions never time
    out: KIP-939 makes setting it an error)."""

    kind: Literal["dual_writer"] = "dual_writer"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None
    database: DatabaseSpec = Field(default_factory=DatabaseSpec)
    transaction_timeout_ms: None = None  # type: ignore[assignment]

    @field_validator("transaction_timeout_ms", mode="before")
    @classmethod
    def _no_transaction_timeout(cls, value: object) -> None:
        if value is not None:
            raise ValueError(
                "transaction_timeout_ms cannot be set on a dual_writer: its two-phase-commit "
                "transactions never time out (KIP-939)"
            )
        return None

    @field_validator("open_for_ms", mode="after")
    @classmethod
    def _no_open_for(cls, value: int) -> int:
        if value:
            raise ValueError(
                "open_for_ms cannot be set on a dual_writer: its transactions end in a "
                "two-phase commit with the database (hold them with a crash hold point)"
            )
        return value


def two_phase_client(
    spec: DualWriterSpec,
    config: WorkloadConfig,
    bootstrap: str,
    transactional_id: str,
    client_id: str,
    writer: HistoryWriter,
    reporter: Reporter | None = None,
) -> TwoPhaseProducerClient:
    """Our 2PC producer for a dual writer, recording into ``writer``. It keeps retrying
    while the run stops (no ``stopping``): a 2PC transaction given up on never times out."""
    from ..dual_write.two_phase_client import TwoPhaseProducerClient
    from ..ours import our_config

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "transactional.id": transactional_id,
        "linger.ms": 5,
        **config.client_overrides(spec),
    }
    return TwoPhaseProducerClient(
        our_config(conf, spec.transaction_version, enable_two_phase_commit=True),
        writer,
        reporter=reporter,
        request_type="dual",
        padding_bytes=spec.padding_bytes,
    )


class DualWriterWorker(TransactionalProducerWorker):
    """The seed's normal-processing recipe per step; its recovery recipe at start and after a
    reset that left a prepared transaction in doubt."""

    request_type = "dual"
    spec: DualWriterSpec
    client: TwoPhaseProducerClient | None

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.db: Database | None = None
        #: A transaction prepared and not known to be completed (recovery completes it).
        self.in_doubt: int | None = None

    def open_clients(self) -> None:
        from ..dual_write.connect import open_database

        if self.db is None:
            self.db = open_database(self.spec.database, Path(self.ctx.run_dir))
        self.client = two_phase_client(
            self.spec,
            self.ctx.config,
            self.ctx.bootstrap,
            self.transactional_id,
            self.process,
            self.writer,
            self.ctx.reporter,
        )

    def close_clients(self, abort_open: bool) -> None:
        # A 2PC transaction never times out: one left open (prepared or not) would hold its
        # partitions' LSO forever, so stopping runs the recovery recipe whatever abort_open.
        c = self.client
        if self.in_doubt is None and c is not None:
            self.in_doubt = c.open_txn
        try:
            if self.in_doubt is not None and c is not None:
                self._recover_quietly()
        finally:
            super().close_clients(abort_open)
            if self.db is not None:
                self.db.close()
                self.db = None

    def _recover_quietly(self) -> None:
        """A clean stop leaves no transaction open (best effort)."""
        with contextlib.suppress(ClientError, DatabaseError, RuntimeError):
            self.reset()
            self.ensure_init()

    def _db(self) -> Database:
        assert self.db is not None, "worker not started"
        return self.db

    def ensure_init(self) -> TwoPhaseProducerClient:
        """Initialise through the recovery recipe (which completes an in-doubt transaction)."""
        from ..dual_write.recovery import recover

        c = self.client
        assert c is not None, "worker not started"
        if not c.initialized:
            try:
                recover(c, self._db(), self.transactional_id, self.in_doubt, self.spec.op_timeout_s)
            except ProducerReset:
                self.reset()
                raise
            self.in_doubt = None
        return c

    def step(self) -> None:
        try:
            self.transaction()
        except ProducerReset:
            self._rollback()
            self.reset()
        except (ClientError, DatabaseError):
            self._rollback()
            if self.in_doubt is None:
                self._abort_if_open()

    def _rollback(self) -> None:
        with contextlib.suppress(DatabaseError):
            self._db().rollback()

    def rows(self, txn: int, sent: list[tuple[str, int, str]]) -> list[DbRow]:
        return [DbRow(value, self.process, txn, topic, p) for topic, p, value in sent]

    def send_all(self, txn: int) -> list[tuple[str, int, str]]:
        """Send the transaction's records; ``(topic, partition, value)`` of each sent."""
        c = self.client
        assert c is not None
        parts = self.rng.sample(self._parts, self.spec.partitions_per_txn)
        sent = []
        for i in range(self.spec.records_per_txn):
            if c.txn_abortable:
                break
            topic, p = parts[i % len(parts)]
            value = encode_value(self.process, txn, i)
            c.send(topic, p, value, key=str(p) if self.spec.keyed else None, txn=txn)
            sent.append((topic, p, value))
        c.flush(FLUSH_TIMEOUT_S)
        return sent

    def prepared(self, txn: int, may_abandon: bool = True) -> tuple[str, list[DbRow]] | None:
        """Recipe steps 1-6: database begin, Kafka begin, send, prepare, rows and state written
        (not committed). None: the transaction was abandoned (rolled back and aborted), by
        chance (``abort_probability``, when ``may_abandon``) or after a failed send."""
        db, c = self._db(), self.ensure_init()
        db.begin()
        c.begin(txn)
        sent = self.send_all(txn)
        if c.txn_abortable or (may_abandon and chance(self.rng, self.spec.abort_probability)):
            on_purpose = not c.txn_abortable  # the draw chose it, no error forced it
            db.rollback()
            c.abort(txn, self.spec.op_timeout_s, self.spec.commit_retries, on_purpose=on_purpose)
            return None
        self.in_doubt = txn  # from here an unknown outcome leaves it to recovery
        try:
            state = c.prepare(txn, self.spec.op_timeout_s)
        except ProducerReset:
            raise
        except ClientError:
            self.in_doubt = None  # not prepared: the step aborts it
            raise
        rows = self.rows(txn, sent)
        db.write_rows(rows)
        db.upsert_state(StoredState(self.transactional_id, str(state), self.process, txn))
        return str(state), rows

    def transaction(self) -> Any:
        txn = self.next_txn
        self.next_txn += 1  # never reused, even if the transaction fails
        done = self.prepared(txn)
        if done is None:
            return None
        from ...clients.two_phase import PreparedTxnState
        from ..dual_write.recovery import stored_state

        state = PreparedTxnState.from_string(done[0])
        db, c = self._db(), self.client
        assert c is not None
        try:
            db.commit()
        except DatabaseError:
            # The seed: a failed database commit goes through recovery; what the database
            # holds decides (its old state: abort).
            self._rollback()
            c.complete(txn, stored_state(db, self.transactional_id), state, self.spec.op_timeout_s)
            self.in_doubt = None
            raise
        c.complete(txn, state, state, self.spec.op_timeout_s)
        self.in_doubt = None
        return None

    def hold(self, point: str, announce: Callable[[str], None]) -> NoReturn:
        """after-prepare: prepared, rows and state written, the database commit not done;
        after-db-commit: the database committed, the Kafka commit never called."""
        if point not in (AFTER_PREPARE, AFTER_DB_COMMIT):
            super().hold(point, announce)
        txn = self.next_txn
        self.next_txn += 1
        done = self.prepared(txn, may_abandon=False)
        if done is None:
            raise SystemExit("the transaction to hold at was abandoned before prepare")
        if point == AFTER_DB_COMMIT:
            self._db().commit()
        announce(f"HOLD txn={txn} transactional_id={self.transactional_id} state={done[0]}")
        hold_forever()


KIND = UserKind(
    spec=DualWriterSpec,
    worker=DualWriterWorker,
    prefix="dual-writer",
    locust_user="DualWriterUser",
    crash_holds={
        "crash_writer_after_prepare": AFTER_PREPARE,
        "crash_writer_after_db_commit": AFTER_DB_COMMIT,
        "crash_writer_in_recovery": AFTER_DB_COMMIT,
    },
    native_client=False,  # our own client (pure Python)
    keeps_prepared_transactions=True,
)
