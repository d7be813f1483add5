"""Our recording producer with KIP-939's calls: a keep-prepared init, prepare and complete,
each recorded in the history (INIT, PREPARE, and the COMMIT or ABORT that completing
decides)."""

from __future__ import annotations

from typing import Any

from ....rundir.schema import EventType, Outcome
from ...clients.two_phase import PreparedTxnState
from ..ours import OurProducerClient
from ..recording import ClientError, ErrorClass


class TwoPhaseProducerClient(OurProducerClient):
    """An :class:`~..ours.OurProducerClient` whose producer has 2PC enabled."""

    #: The next ``init`` keeps a prepared transaction (KIP-939 recovery).
    keep_prepared = False

    def _call_init(self, timeout_s: float) -> None:
        p = self._p()
        self._run(p.init_transactions(timeout_s, keep_prepared_txn=self.keep_prepared), timeout_s)

    def init_keep_prepared(self, timeout_s: float) -> PreparedTxnState:
        """init_transactions(keep_prepared_txn=True) (INIT op); the transaction the
        coordinator kept (empty: none). Raises ProducerReset on failure."""
        self.keep_prepared = True
        try:
            self.init(timeout_s)
        finally:
            self.keep_prepared = False
        return self._p().ongoing_prepared_state

    def prepare(self, txn: int, timeout_s: float) -> PreparedTxnState:
        """prepare_transaction (PREPARE op: ok with the prepared state's producer id and epoch).
        An abortable failure leaves the transaction to be aborted (ClientError); any other
        resets the producer (the prepare may have reached every partition)."""
        op = self.writer.invoke(EventType.PREPARE, txn=txn, **self.id_fields())
        try:
            state = self._run(self._p().prepare_transaction(timeout_s), timeout_s)
        except Exception as e:
            failure = self._failure(e)
            if failure.error_class == ErrorClass.ABORTABLE:
                self._finish(op, "prepare", Outcome.FAIL, failure.text)
                self.txn_abortable = True
                raise ClientError("prepare_transaction", failure, e) from e
            self._finish(op, "prepare", Outcome.INFO, failure.text)
            raise self._reset("prepare_transaction", failure, e) from e
        self._finish(op, "prepare", Outcome.OK, **_state_fields(state))
        return state

    def run_complete(self, state: PreparedTxnState, timeout_s: float) -> bool:
        """complete_transaction unrecorded: for a keep-prepared init that found no
        transaction (the producer only leaves its recovery mode; nothing is sent)."""
        try:
            return self._run(self._p().complete_transaction(state, timeout_s), timeout_s)
        except Exception as e:
            raise self._reset("complete_transaction", self._failure(e), e) from e

    def complete(
        self, txn: int | None, state: PreparedTxnState, ongoing: PreparedTxnState, timeout_s: float
    ) -> bool:
        """complete_transaction(state): commits when ``state`` names the ``ongoing`` prepared
        transaction, else aborts; recorded as that COMMIT or ABORT of ``txn``. Returns
        whether it committed. Raises ProducerReset when the outcome is unknown."""
        commit = not ongoing.is_empty and state == ongoing
        etype = EventType.COMMIT if commit else EventType.ABORT
        name = etype.value
        op = self.writer.invoke(etype, txn=txn, **self.id_fields())
        try:
            committed = self._run(self._p().complete_transaction(state, timeout_s), timeout_s)
        except Exception as e:
            failure = self._failure(e)
            self.ids_may_change()
            self._finish(op, name, Outcome.INFO, failure.text)
            self.open_txn = None
            raise self._reset("complete_transaction", failure, e) from e
        self.open_txn = None
        if committed != commit:
            self._finish(op, name, Outcome.INFO, f"complete_transaction committed={committed}")
            raise RuntimeError(
                f"complete_transaction {'committed' if committed else 'aborted'} although the "
                f"state {state} {'matches' if commit else 'does not match'} {ongoing}"
            )
        self._finish(op, name, Outcome.OK)
        return committed


def _state_fields(state: PreparedTxnState) -> dict[str, Any]:
    if state.is_empty:
        return {}
    return {"producer_id": state.producer_id, "producer_epoch": state.epoch}
