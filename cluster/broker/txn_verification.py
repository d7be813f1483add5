"""KIP-890 on the broker: ask the transaction coordinator whether a transaction has
added a partition before appending its first transactional batch there (part 1,
``VerifyOnly``), or have the coordinator add it (part 2: Produce v12 under TV2) — Kafka's
AddPartitionsToTxnManager.

A produce that needs verification hands its partitions to :meth:`TxnVerifier.verify`
and awaits the answer; its connection waits, every other connection and partition
goes on. Checks are grouped per coordinator node: while one AddPartitionsToTxn v5
request is in flight to a node, the checks for that node (of any number of
transactional ids, each verify-only or add) wait together and go out as the next
request. So a lost response would hold every verification to that coordinator, and
with them the Produce requests of every transactional producer writing to this broker,
for the whole request timeout; the connection probes itself instead once its request
has gone unanswered for ``STALL_PROBE_S`` (``net.client``), which fails a lost request
as NETWORK_EXCEPTION soon after the network heals.

A second check for a transactional id already waiting replaces the first: the
older one is answered NETWORK_EXCEPTION (same epoch: a retry) or
INVALID_PRODUCER_EPOCH (it has the older epoch), as Kafka does.

Answers are translated as Kafka does: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH,
TRANSACTION_ABORTABLE (partition not in the transaction) INVALID_TXN_STATE for
clients that predate it (Produce below v11), a refused cluster action
INVALID_TXN_STATE; a coordinator that
does not know the version skips verification. A lost connection or timeout is
NETWORK_EXCEPTION (the produce path turns retriable errors into
NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..coordinator.placement import KEY_TYPE_TRANSACTION, CoordinatorPlacement
from ..net.client import STALL_PROBE_S, PeerConnection, PeerUnavailable
from ..protocol.build import make
from ..protocol.codec import request_class

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Errors = dict[TopicPartition, int]

REQUEST_VERSION = 5  # AddPartitionsToTxn v4+: batched, VerifyOnly; v5: TRANSACTION_ABORTABLE
REQUEST_TIMEOUT_S = 30.0

NETWORK_EXCEPTION = int(E.network_exception)
INVALID_TXN_STATE = int(E.invalid_txn_state)
INVALID_PRODUCER_EPOCH = int(E.invalid_producer_epoch)
COORDINATOR_NOT_AVAILABLE = int(E.coordinator_not_available)
PRODUCER_FENCED = int(E.producer_fenced)
TRANSACTION_ABORTABLE = int(E.transaction_abortable)


def _translated(code: int, generic_errors: bool) -> int:
    if code == PRODUCER_FENCED:
        return INVALID_PRODUCER_EPOCH
    if code == TRANSACTION_ABORTABLE and not generic_errors:
        return INVALID_TXN_STATE
    return code


@dataclass
class VerificationStats:
    """Kafka's AddPartitionsToTxnManager metrics: VerificationTimeMs (a histogram;
    here count and sum) and VerificationFailureRate (a meter; here its count)."""

    time_ms_count: int = 0
    time_ms_sum: float = 0.0
    failures: int = 0


@dataclass
class _Check:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    started: float
    done: asyncio.Future[Errors]
    verify_only: bool = True
    generic_errors: bool = False  # the client knows TRANSACTION_ABORTABLE


@dataclass
class _NodeQueue:
    waiting: dict[str, _Check] = field(default_factory=dict)
    in_flight: bool = False


class TxnVerifier:
    def __init__(
        self,
        placement: Callable[[], CoordinatorPlacement],
        node_address: Callable[[int], tuple[str, int] | None],
        client_id: str,
        clock: Callable[[], float] = time.monotonic,
        stall_probe_s: float = STALL_PROBE_S,
    ) -> None:
        self._placement = placement
        self._node_address = node_address
        self._client_id = client_id
        self._clock = clock
        self._stall_probe_s = stall_probe_s
        self._queues: dict[int, _NodeQueue] = {}
        self._conns: dict[tuple[str, int], PeerConnection] = {}
        self.stats = VerificationStats()

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        verify_only: bool = True,
        generic_errors: bool = False,
    ) -> Errors:
        """The partitions that failed verification (or could not be added, with
        ``verify_only=False``), with the error for the producer."""
        started = self._clock()
        placement = self._placement()
        node = placement.owner(KEY_TYPE_TRANSACTION, transactional_id)
        if self._node_address(node) is None:
            return self._finish(started, dict.fromkeys(partitions, COORDINATOR_NOT_AVAILABLE))
        done: asyncio.Future[Errors] = asyncio.get_running_loop().create_future()
        check = _Check(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            started,
            done,
            verify_only,
            generic_errors,
        )
        queue = self._queues.setdefault(node, _NodeQueue())
        older = queue.waiting.get(transactional_id)
        if older is not None:
            if older.producer_epoch > producer_epoch:
                return self._finish(started, dict.fromkeys(partitions, INVALID_PRODUCER_EPOCH))
            error = (
                NETWORK_EXCEPTION
                if older.producer_epoch == producer_epoch
                else (INVALID_PRODUCER_EPOCH)
            )
            self._resolve(older, dict.fromkeys(older.partitions, error))
        queue.waiting[transactional_id] = check
        self._maybe_send(node)
        return await done

    def _finish(self, started: float, errors: Errors) -> Errors:
        self._record(started, errors)
        return errors

    def _record(self, started: float, errors: Errors) -> None:
        self.stats.time_ms_count += 1
        self.stats.time_ms_sum += (self._clock() - started) * 1000
        self.stats.failures += len(errors)

    def _resolve(self, check: _Check, errors: Errors) -> None:
        if not check.done.done():
            self._record(check.started, errors)
            check.done.set_result(errors)

    def _maybe_send(self, node: int) -> None:
        queue = self._queues[node]
        if queue.in_flight or not queue.waiting:
            return
        batch, queue.waiting = queue.waiting, {}
        queue.in_flight = True
        conn = self._connection(node)
        if conn is not None:
            # The usual case, a connection that is up: send now, answered from the data
            # callback (no task, no future); else the task connects first.
            def answered(response: Any, error: BaseException | None) -> None:
                self._delivered(node, batch, response, error)
                self._sent(node)

            if conn.request_nowait(self._request(batch), REQUEST_TIMEOUT_S, answered):
                return
        task = asyncio.get_running_loop().create_task(self._send(node, batch))
        task.add_done_callback(lambda _: self._sent(node))

    def _sent(self, node: int) -> None:
        self._queues[node].in_flight = False
        self._maybe_send(node)

    def _connection(self, node: int) -> PeerConnection | None:
        address = self._node_address(node)
        if address is None:
            return None
        conn = self._conns.get(address)
        if conn is None:
            conn = self._conns[address] = PeerConnection(
                *address, client_id=self._client_id, stall_probe_s=self._stall_probe_s
            )
        return conn

    async def _send(self, node: int, batch: dict[str, _Check]) -> None:
        conn = self._connection(node)
        if conn is None:
            for check in batch.values():
                self._resolve(check, dict.fromkeys(check.partitions, COORDINATOR_NOT_AVAILABLE))
            return
        try:
            response = await conn.request(self._request(batch), timeout=REQUEST_TIMEOUT_S)
        except (PeerUnavailable, OSError) as exc:
            self._delivered(node, batch, None, exc)
            return
        self._delivered(node, batch, response, None)

    @staticmethod
    def _request(batch: dict[str, _Check]) -> Any:
        return make(
            request_class(24, REQUEST_VERSION),
            transactions=[
                {
                    "transactional_id": c.transactional_id,
                    "producer_id": c.producer_id,
                    "producer_epoch": c.producer_epoch,
                    "verify_only": c.verify_only,
                    "topics": _by_topic(c.partitions),
                }
                for c in batch.values()
            ],
        )

    def _delivered(
        self, node: int, batch: dict[str, _Check], response: Any, error: BaseException | None
    ) -> None:
        if error is not None:
            log.info("verification request to node %d failed: %s", node, error)
            for check in batch.values():
                self._resolve(check, dict.fromkeys(check.partitions, NETWORK_EXCEPTION))
            return
        self._answer(batch, response)

    def _answer(self, batch: dict[str, _Check], response: object) -> None:
        top = int(getattr(response, "error_code", 0))
        if top == int(E.unsupported_version):
            for check in batch.values():  # a coordinator without verification: skip it
                self._resolve(check, {})
            return
        if top:
            error = INVALID_TXN_STATE if top == int(E.cluster_authorization_failed) else top
            for check in batch.values():
                self._resolve(check, dict.fromkeys(check.partitions, error))
            return
        for result in getattr(response, "results_by_transaction", ()):
            if result.transactional_id not in batch:
                continue
            check = batch.pop(result.transactional_id)
            errors: Errors = {}
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    code = int(p.partition_error_code)
                    if code:
                        key = (topic.name, p.partition_index)
                        errors[key] = _translated(code, check.generic_errors)
            self._resolve(check, errors)
        for check in batch.values():  # left unanswered by the coordinator
            self._resolve(check, dict.fromkeys(check.partitions, NETWORK_EXCEPTION))

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()


def _by_topic(partitions: list[TopicPartition]) -> list[dict[str, object]]:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]
