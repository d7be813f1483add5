"""KIP-664 tooling APIs on the coordinator side: ListTransactions v0-v2 (every node
answers for the transactional ids it coordinates; an admin client asks them all) and
DescribeTransactions v0 (sent to each id's coordinator)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...server.dispatch import ApiRegistry, RequestContext
from .coordinator import TransactionCoordinator
from .id_pattern import InvalidPattern, id_matcher


class TransactionAdminApis:
    def __init__(self, coordinator: TransactionCoordinator | None) -> None:
        self.c = coordinator

    def register(self, registry: ApiRegistry) -> None:
        registry.register(66, 0, 2, self.list_transactions, owner="transactions-admin")
        registry.register(65, 0, 0, self.describe_transactions, owner="transactions-admin")

    async def list_transactions(self, ctx: RequestContext, request: Any) -> Any:
        if self.c is None:  # a broker-only node coordinates nothing
            return ctx.respond(throttle_time=0, error_code=0, transaction_states=[])
        pattern_text = getattr(request, "transactional_id_pattern", None)
        try:
            matches = id_matcher(pattern_text) if pattern_text else None
        except InvalidPattern as exc:
            return ctx.respond(
                throttle_time=0,
                error_code=ErrorCode.invalid_regular_expression,
                transaction_states=[],
                unknown_state_filters=[],
                error_message=str(exc),
            )
        result = self.c.list_transactions(
            request.state_filters,
            request.producer_id_filters,
            getattr(request, "duration_filter", -1),
        )
        listed = [t for t in result.transactions if matches is None or matches(t.transactional_id)]
        return ctx.respond(
            throttle_time=0,
            error_code=result.error,
            unknown_state_filters=list(result.unknown_state_filters),
            transaction_states=[
                {
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "transaction_state": t.state,
                }
                for t in listed
            ],
        )

    async def describe_transactions(self, ctx: RequestContext, request: Any) -> Any:
        states = []
        for txn_id in request.transactional_ids:
            if self.c is None:
                states.append(error_state(txn_id, ErrorCode.not_coordinator))
                continue
            d = self.c.describe(txn_id)
            if d.error:
                states.append(error_state(txn_id, d.error))
                continue
            topics: dict[str, list[int]] = {}
            for topic, partition in d.partitions:
                topics.setdefault(topic, []).append(partition)
            states.append(
                {
                    "error_code": 0,
                    "transactional_id": txn_id,
                    "transaction_state": d.state,
                    "transaction_timeout": d.transaction_timeout_ms,
                    "transaction_start_time": d.transaction_start_time_ms,
                    "producer_id": d.producer_id,
                    "producer_epoch": d.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in sorted(topics.items())],
                }
            )
        return ctx.respond(throttle_time=0, transaction_states=states)


def error_state(txn_id: str, code: int) -> dict[str, Any]:
    """A DescribeTransactions entry for an id that cannot be described (``code``)."""
    return {
        "error_code": code,
        "transactional_id": txn_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }
