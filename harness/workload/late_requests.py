"""Late requests on our recording producer: a Produce or an EndTxn built in one transaction
and delivered after it ended, as a network that delays a request would deliver it.

:class:`LateRequestProducer` is the recording client of a ``tv2_producer`` whose
``misbehavior.late_request`` names one of KIP-890's three cases (the transaction
pairs that use it: :mod:`.kinds.late_transactions`):

* ``produce_after_abort``: a Produce of transaction N arrives after N's abort completed;
* ``produce_into_next``: a Produce of transaction N arrives after transaction N+1 added the
  partition;
* ``end_txn_into_next``: N's first EndTxn(commit), whose answer the client never saw,
  arrives while N+1 is open.

A held Produce is recorded as a SEND of transaction N, completed by the answer it finally
gets, so the checkers judge what the cluster did with it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from ...cluster.protocol.error_names import error_name
from ...rundir.schema import Outcome
from ...rundir.writer import Op
from ..clients import KafkaClientError, RetriableError
from ..clients.producer import HeldRequest, Producer
from .ours import OurProducerClient
from .recording import ClientError, ErrorClass

T = TypeVar("T")

API_DESCRIBE_TRANSACTIONS = 65
#: Coordinator states in which a transaction's markers are all written.
FINISHED = frozenset({"CompleteCommit", "CompleteAbort", "Empty"})
OP_TIMEOUT_S = 30.0
WAIT_S = 30.0


@dataclass
class HeldSend:
    """A held Produce of one record and the SEND op recorded for it."""

    request: HeldRequest
    op: Op
    item: dict[str, Any]


class LateRequestProducer(OurProducerClient):
    """Our recording producer, able to hold a request and deliver it late."""

    def _call(self, what: str, coro: Coroutine[Any, Any, T]) -> T:
        """Run a call of our producer; its error raised as the workers' :class:`ClientError`."""
        try:
            return self._run(coro, OP_TIMEOUT_S)
        except KafkaClientError as exc:
            failure = self._failure(exc)
            if failure.error_class == ErrorClass.FATAL:
                raise self._reset(what, failure, exc) from exc
            self.txn_abortable = True
            raise ClientError(what, failure, exc) from exc

    def hold_produce(self, txn: int, topic: str, partition: int, value: str) -> HeldSend:
        """Build (and record the invocation of) a Produce of ``value`` for transaction
        ``txn``; :meth:`release` delivers it."""
        p = self._p()
        op, item = self._invoke_send(topic, partition, value, None, txn, None)
        try:
            request = self._run(
                p.hold_produce(topic, partition, [(None, value.encode())]), OP_TIMEOUT_S
            )
        except KafkaClientError as exc:
            self.txn_abortable = True
            self._send_rejected(op, self._failure(exc), exc)
        return HeldSend(request, op, item)

    def add_partition(self, topic: str, partition: int) -> None:
        """Add the partition to the open transaction (TV0/1: AddPartitionsToTxn) without
        writing: a held Produce built for it and never sent, taking no sequence number."""
        p = self._p()
        held = p.hold_produce(topic, partition, [(None, b"")], advance_sequence=False)
        self._call("AddPartitionsToTxn", held)

    def timed_out(self, held: HeldSend) -> None:
        """Give up on the held Produce as on one that timed out: the transaction must be
        aborted, with the KIP-360 epoch bump under TV0/1 (so later writes do not depend on
        the late one's sequence number)."""
        p = self._p()

        def doom() -> None:
            p.sm.abortable(RetriableError(f"{held.request.name} timed out"), bump=True)

        self.loop.call(doom)
        self.txn_abortable = True

    def release(self, held: HeldSend) -> int:
        """Deliver the held Produce now and complete its SEND op with the answer; returns
        the partition's error code (-1: no answer)."""
        try:
            response = self._run(held.request.send(), OP_TIMEOUT_S)
        except KafkaClientError as exc:
            self._record_ack(held.op, Outcome.INFO, f"{held.request.name}: {exc}", None)
            return -1
        part = response.responses[0].partition_responses[0]
        code = int(part.error_code)
        if code == 0:
            done = {**held.item, "offset": int(part.base_offset)}
            self._record_ack(held.op, Outcome.OK, None, [done])
        else:
            self._record_ack(held.op, Outcome.FAIL, f"{error_name(code)} ({code})", None)
        return code

    def hold_end_txn(self, commit: bool) -> HeldRequest:
        """The EndTxn the client would send now for the open transaction, sent by
        :meth:`deliver`."""
        return self._call("EndTxn", self._p().hold_end_txn(commit))

    def deliver(self, request: HeldRequest) -> int:
        """Send a held coordinator request now; returns its error code (-1: no answer)."""
        try:
            response = self._run(request.send(), OP_TIMEOUT_S)
        except KafkaClientError:
            return -1
        return int(response.error_code)

    def wait_finished(self) -> str:
        """Wait (bounded) until the coordinator has written the markers of the producer's
        last transaction (DescribeTransactions); returns the state it saw last."""
        deadline = time.monotonic() + WAIT_S
        state: str = self._run(_wait_finished(self._p(), deadline), WAIT_S)
        return state


async def _coordinator_state(p: Producer) -> str:
    conn = await p.txn.coordinator()
    body = {"transactional_ids": [p.config.transactional_id]}
    request = conn.build(API_DESCRIBE_TRANSACTIONS, body, version=0)
    response = await conn.send_entity(request, OP_TIMEOUT_S)
    states = response.transaction_states
    return str(states[0].transaction_state) if states else "Unknown"


async def _wait_finished(p: Producer, deadline: float) -> str:
    state = "Unknown"
    while time.monotonic() < deadline:
        try:
            state = await _coordinator_state(p)
        except KafkaClientError:
            state = "Unknown"
        if state in FINISHED:
            return state
        await asyncio.sleep(0.05)
    return state
