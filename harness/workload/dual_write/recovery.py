"""The seed's recovery recipe: read the prepared transaction state from the database, init the
producer keeping the prepared transaction, and complete it with that state (commit if it is
the one the database committed with its rows, else abort)."""

from __future__ import annotations

import enum
from collections.abc import Callable

from ...clients.two_phase import PreparedTxnState
from .database import Database
from .two_phase_client import TwoPhaseProducerClient


class Recovered(enum.StrEnum):
    NOTHING = "nothing"  #: the coordinator kept no prepared transaction
    COMMITTED = "committed"
    ABORTED = "aborted"


def stored_state(db: Database, transactional_id: str) -> PreparedTxnState:
    """The state the database committed for ``transactional_id`` (empty: none yet)."""
    stored = db.read_state(transactional_id)
    return PreparedTxnState.from_string(stored.prepared_state) if stored else PreparedTxnState()


def recover(
    client: TwoPhaseProducerClient,
    db: Database,
    transactional_id: str,
    txn: int | None,
    timeout_s: float,
    after_init: Callable[[PreparedTxnState], None] | None = None,
) -> Recovered:
    """Run the recovery recipe with a fresh ``client`` (its history names the writer whose
    transaction ``txn`` may be in doubt; None when no transaction is known to be).
    ``after_init`` is called between the keep-prepared init and the completion (the crash
    fault's hold point). Raises ProducerReset when an outcome stays unknown."""
    state = stored_state(db, transactional_id)
    ongoing = client.init_keep_prepared(timeout_s)
    if after_init is not None:
        after_init(ongoing)
    if ongoing.is_empty:
        # Nothing kept: completing only leaves the producer's recovery mode.
        client.run_complete(state, timeout_s)
        return Recovered.NOTHING
    if txn is None and state == ongoing:
        txn = db_txn(db, transactional_id)
    committed = client.complete(txn, state, ongoing, timeout_s)
    return Recovered.COMMITTED if committed else Recovered.ABORTED


def db_txn(db: Database, transactional_id: str) -> int | None:
    stored = db.read_state(transactional_id)
    return stored.txn if stored else None
