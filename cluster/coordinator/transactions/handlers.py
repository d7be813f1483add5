"""Kafka wire handlers of the transaction coordinator: AddPartitionsToTxn (24),
AddOffsetsToTxn (25) and EndTxn (26). InitProducerId lives in
``init_producer_id_api.py`` (served on every node).

Errors that older clients do not know are translated as Kafka's KafkaApis does:
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn below v2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...protocol.hot_codecs import add_partitions_to_txn_response, end_txn_response
from ...server.dispatch import RequestContext

if TYPE_CHECKING:
    from .coordinator import TransactionCoordinator

OWNER = "transaction-coordinator"

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26

VERSIONS: dict[int, tuple[int, int]] = {
    ADD_PARTITIONS_TO_TXN: (0, 3),  # v4+: KIP-890 batched/verify-only form (not yet)
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 3),  # v4: TV1 error semantics, v5: TV2 epoch bump (not yet)
}

NONE = 0


def fenced_for(version: int, error: int, first_version_with_fenced: int) -> int:
    """PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH for versions that predate it."""
    if error == int(E.producer_fenced) and version < first_version_with_fenced:
        return int(E.invalid_producer_epoch)
    return error


def partition_results(
    coordinator: TransactionCoordinator,
    partition_exists: Callable[[str, int], bool],
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Iterable[tuple[str, Iterable[int]]],
    version: int,
) -> dict[str, dict[int, int]]:
    """One transaction's AddPartitionsToTxn: topic -> partition -> error.

    Unknown partitions fail the whole request: they get UNKNOWN_TOPIC_OR_PARTITION
    and the others OPERATION_NOT_ATTEMPTED (nothing is added). Otherwise every
    partition carries the coordinator's single answer. Shared by v0-v3 and (later) the
    v4+ batched form.
    """
    wanted: dict[str, list[int]] = {}
    for name, parts in topics:
        bucket = wanted.get(name)
        if bucket is None:
            wanted[name] = list(dict.fromkeys(parts))  # in order, without repeats
            continue
        for p in parts:
            if p not in bucket:
                bucket.append(p)
    unknown = [
        (name, p) for name, parts in wanted.items() for p in parts if not partition_exists(name, p)
    ]
    if unknown:
        missing = set(unknown)
        return {
            name: {
                p: int(E.unknown_topic_or_partition)
                if (name, p) in missing
                else int(E.operation_not_attempted)
                for p in parts
            }
            for name, parts in wanted.items()
        }
    error = coordinator.add_partitions(
        transactional_id,
        producer_id,
        producer_epoch,
        [(name, p) for name, parts in wanted.items() for p in parts],
    )
    error = fenced_for(version, error, 2)
    return {name: dict.fromkeys(parts, error) for name, parts in wanted.items()}


class TransactionApis:
    """The request handlers, bound to one coordinator."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.c = coordinator

    async def add_partitions_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        txn_id = req.v3_and_below_transactional_id
        if self.c.is_completing(txn_id):
            await self.c.wait_if_completing(txn_id)
        results = partition_results(
            self.c,
            self.c.partition_exists,
            txn_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            [(t.name, t.partitions) for t in req.v3_and_below_topics],
            ctx.api_version,
        )
        topics = [(name, list(parts.items())) for name, parts in results.items()]
        body = add_partitions_to_txn_response(ctx.api_version, topics)
        errors = tuple(e for _, parts in topics for _, e in parts if e)
        return ctx.encoded(body, errors)

    async def add_offsets_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        await self.c.wait_if_completing(req.transactional_id)
        error = self.c.add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
        )
        return ctx.respond(throttle_time=0, error_code=fenced_for(ctx.api_version, error, 2))

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        if self.c.is_completing(req.transactional_id):
            await self.c.wait_if_completing(req.transactional_id)
        error = self.c.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed)
        )
        error = fenced_for(ctx.api_version, error, 2)
        return ctx.encoded(end_txn_response(ctx.api_version, error), (error,) if error else ())

    def by_api_key(self) -> dict[int, Any]:
        return {
            ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            END_TXN: self.end_txn,
        }


def register_transaction_apis(
    coordinator: TransactionCoordinator, registry: Any
) -> TransactionApis:
    apis = TransactionApis(coordinator)
    for api_key, handler in apis.by_api_key().items():
        lo, hi = VERSIONS[api_key]
        registry.register(api_key, lo, hi, handler, owner=OWNER)
    return apis


__all__ = [
    "OWNER",
    "VERSIONS",
    "TransactionApis",
    "fenced_for",
    "partition_results",
    "register_transaction_apis",
]
