"""InitProducerId (22) v0-v6, served by every node.

A null transactional id (idempotent producer) gets a fresh producer id from the
node's producer-id blocks, on any node. A transactional id is served by the local
:class:`TransactionCoordinator` when it owns the id (NOT_COORDINATOR otherwise,
COORDINATOR_LOAD_IN_PROGRESS while its partition loads); a node without a transaction
coordinator answers NOT_COORDINATOR, so the client looks the coordinator up again.

PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4 (as Kafka does).
v3+ carries the producer id/epoch the client knows (KIP-360): both -1 for a new
producer, both set for a re-initialisation; one without the other is INVALID_REQUEST.
v5 (KIP-890) only lets the answer carry TRANSACTION_ABORTABLE, which the coordinator
never needs here. v6 (KIP-939) adds Enable2Pc and KeepPreparedTxn to the request and the
kept transaction's producer id and epoch (OngoingTxnProducerId/Epoch) to the answer;
``enable2_pc`` is also what an authorizer checks for the TWO_PHASE_COMMIT operation.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode as E

from ...server.dispatch import RequestContext
from .coordinator import InitResult
from .handlers import fenced_for

if TYPE_CHECKING:
    from .coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

INIT_PRODUCER_ID = 22
MIN_VERSION = 0
MAX_VERSION = 6  # v5: KIP-890 (TRANSACTION_ABORTABLE known), v6: KIP-939 2PC


class ProducerIds(Protocol):
    async def next_id(self) -> int: ...


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


class InitProducerIdApi:
    def __init__(
        self, blocks: ProducerIds, txn_coordinator: TransactionCoordinator | None = None
    ) -> None:
        self.blocks = blocks
        self.txn_coordinator = txn_coordinator

    def register(self, registry: Any) -> None:
        registry.register(
            INIT_PRODUCER_ID, MIN_VERSION, MAX_VERSION, self.handle, owner="init-producer-id"
        )

    async def init(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
        *,
        enable_two_phase_commit: bool = False,
        keep_prepared_txn: bool = False,
    ) -> InitResult:
        if transactional_id is None:
            try:
                return InitResult(0, await self.blocks.next_id(), 0)
            except Exception as exc:
                log.info("allocating a producer id failed: %s", exc)
                return InitResult(int(E.coordinator_load_in_progress))
        if not transactional_id or (producer_id == -1) != (producer_epoch == -1):
            return InitResult(int(E.invalid_request))
        if self.txn_coordinator is None:
            return InitResult(int(E.not_coordinator))
        expected = None if producer_id == -1 else (producer_id, producer_epoch)
        await self.txn_coordinator.wait_if_completing(transactional_id)
        return await self.txn_coordinator.init_producer_id(
            transactional_id,
            timeout_ms,
            expected,
            enable_two_phase_commit=enable_two_phase_commit,
            keep_prepared_txn=keep_prepared_txn,
        )

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        result = await self.init(
            request.transactional_id,
            _ms(request.transaction_timeout),
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
            enable_two_phase_commit=bool(getattr(request, "enable2_pc", False)),
            keep_prepared_txn=bool(getattr(request, "keep_prepared_txn", False)),
        )
        return ctx.respond(
            throttle_time=0,
            error_code=fenced_for(ctx.api_version, result.error, 4),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
            ongoing_txn_producer_id=result.ongoing_producer_id,
            ongoing_txn_producer_epoch=result.ongoing_producer_epoch,
        )


__all__ = ["InitProducerIdApi"]
