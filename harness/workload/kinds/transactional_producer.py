"""transactional_producer: transactions of k records over several partitions, random aborts
(a confluent-kafka producer)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

from pydantic import Field

from ....rundir.schema import Outcome, encode_value
from ..clients import ClientError, ProducerReset, chance
from ..recording import RecordingProducer
from ..spec import ProducerSpecBase
from ..workers import (
    FLUSH_TIMEOUT_S,
    ProducerWorker,
    WorkerContext,
    hold_forever,
    hold_until_resumed,
)
from .kind import UserKind

if TYPE_CHECKING:
    from ..config import WorkloadConfig


class TransactionalProducerSpec(ProducerSpecBase):
    kind: Literal["transactional_producer"] = "transactional_producer"
    #: k: records per transaction.
    records_per_txn: Annotated[int, Field(ge=1, le=100_000)] = 10
    #: Distinct partitions (across ``topics``) each transaction writes to.
    partitions_per_txn: Annotated[int, Field(ge=1)] = 2
    abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.1
    #: Chance of flush() before abort_transaction(), so aborted records reach the log
    #: (librdkafka purges unsent records on abort).
    flush_before_abort_probability: Annotated[float, Field(ge=0, le=1)] = 0.5
    transaction_timeout_ms: Annotated[int, Field(ge=1000, le=2_147_483_647)] = 60_000
    #: transactional.id; ``{process}`` and ``{index}`` (the user's number within this spec)
    #: are substituted.  ``{process}`` (default) gives each user its own id; a template on
    #: ``{index}`` alone makes a restarted user fence its previous incarnation.
    transactional_id: Annotated[str, Field(min_length=1)] = "{process}"
    #: Retries of a commit_transaction that fails retriably before it is recorded as unknown.
    commit_retries: Annotated[int, Field(ge=0, le=100)] = 3
    #: Milliseconds a transaction stays open once its records are acknowledged, before it
    #: commits or aborts (0: it ends at once). A long transaction, as a stream processor's
    #: commit interval makes them: the LSO stays behind it meanwhile, a node restart or a
    #: segment roll finds it open, and a read_committed reader that gets its records before
    #: the commit is invoked shows a broken LSO (precommitted_read, aborted_read).
    open_for_ms: Annotated[int, Field(ge=0, le=600_000)] = 0

    def problem_in(self, config: WorkloadConfig) -> str | None:
        total = sum(config.partitions(t) for t in self.topics)
        if self.partitions_per_txn > total:
            return (
                f"partitions_per_txn: {self.partitions_per_txn} exceeds the "
                f"{total} partitions of {self.topics}"
            )
        return None


class TransactionalProducerWorker(ProducerWorker):
    """Transactions of k records over several partitions, random aborts."""

    request_type = "txn"
    spec: TransactionalProducerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.transactional_id = spec.transactional_id.format(process=process, index=index)
        self.next_txn = 0
        self.client = None
        self._parts = self.partitions()

    def start_fields(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id}

    def conf(self) -> dict[str, Any]:
        return self.producer_conf(self.transactional_id)

    def reset(self) -> None:
        """Replace an unusable producer; its open transaction is left to be fenced."""
        if self.client is not None:
            self.client.close(abort_open=False)
        self.open_clients()

    def ensure_init(self) -> RecordingProducer:
        assert self.client is not None, "worker not started"
        if not self.client.initialized:
            try:
                self.client.init(self.spec.op_timeout_s)
            except ProducerReset:
                self.reset()
                raise
        return self.client

    def step(self) -> None:
        try:
            self.transaction()
        except ProducerReset:
            self.reset()
        except ClientError:
            self._abort_if_open()

    def _abort_if_open(self) -> None:
        c = self.client
        if c is not None and c.open_txn is not None:
            try:
                c.abort(c.open_txn, self.spec.op_timeout_s, self.spec.commit_retries)
            except ProducerReset:
                self.reset()

    def begin(self) -> int:
        c = self.ensure_init()
        txn = self.next_txn
        self.next_txn += 1  # never reused, even if begin fails
        c.begin(txn)
        return txn

    def send_records(self, txn: int) -> None:
        c = self.client
        assert c is not None
        parts = self.rng.sample(self._parts, self.spec.partitions_per_txn)
        for i in range(self.spec.records_per_txn):
            if c.txn_abortable:
                break
            topic, p = parts[i % len(parts)]
            key = str(p) if self.spec.keyed else None
            c.send(topic, p, encode_value(self.process, txn, i), key=key, txn=txn)
        c.poll(0)

    def finish(self, txn: int) -> Outcome:
        c = self.client
        assert c is not None
        timeout, retries = self.spec.op_timeout_s, self.spec.commit_retries
        if c.txn_abortable or chance(self.rng, self.spec.abort_probability):
            on_purpose = not c.txn_abortable  # the draw chose it, no error forced it
            if chance(self.rng, self.spec.flush_before_abort_probability):
                c.flush(FLUSH_TIMEOUT_S)
            c.abort(txn, timeout, retries, on_purpose=on_purpose)
            return Outcome.FAIL
        c.flush(FLUSH_TIMEOUT_S)
        if c.txn_abortable:
            c.abort(txn, timeout, retries)
            return Outcome.FAIL
        return c.commit(txn, timeout, retries)

    def transaction(self) -> Outcome:
        txn = self.begin()
        self.send_records(txn)
        if self.spec.open_for_ms:
            self.stay_open()
        return self.finish(txn)

    def stay_open(self) -> None:
        """Wait ``open_for_ms`` with the transaction's records acknowledged (in the log);
        a run that stops meanwhile ends the wait."""
        c = self.client
        assert c is not None
        c.flush(FLUSH_TIMEOUT_S)
        until = time.monotonic() + self.spec.open_for_ms / 1000
        while not c.txn_abortable and not self.ctx.stopping():
            left = until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.1))

    def hold(self, point: str, announce: Callable[[str], None]) -> NoReturn:
        """before-commit: a transaction begun, its records sent and acknowledged (in the
        log), commit never called. zombie: the same, then after the resume signal the rest
        of the transaction's records and its commit (see :mod:`..crashable`)."""
        if point not in ("before-commit", "zombie"):
            super().hold(point, announce)
        txn = self.begin()
        self.send_records(txn)
        assert self.client is not None
        self.client.flush(FLUSH_TIMEOUT_S)
        announce(f"HOLD txn={txn}")
        if point == "zombie":
            hold_until_resumed()
            announce(f"RESUMED txn={txn} outcome={self._zombie_commit(txn)}")
        hold_forever()

    def _zombie_commit(self, txn: int) -> str:
        """Commit ``txn``, as a paused instance does when it wakes.

        Its records were all acknowledged before the pause; it sends no new ones (a woken
        confluent-kafka producer that sent more blocked in their delivery reports once
        fenced), so what is judged is the coordinator's fencing of its EndTxn."""
        c = self.client
        assert c is not None
        try:
            return c.commit(txn, self.spec.op_timeout_s, 0).value
        except (ProducerReset, ClientError) as exc:
            return f"refused ({type(exc).__name__})"


KIND = UserKind(
    spec=TransactionalProducerSpec,
    worker=TransactionalProducerWorker,
    prefix="txn-producer",
    locust_user="TransactionalProducerUser",
    crash_holds={"crash_producer": "before-commit", "zombie_producer": "zombie"},
)
