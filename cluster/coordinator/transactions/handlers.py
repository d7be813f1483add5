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

from ...protocol import verify_codecs
from ...protocol.hot_codecs import add_partitions_to_txn_response, end_txn_response
from ...server.dispatch import RequestContext
from ..placement import GROUP_TOPIC
from .state import TxnState

if TYPE_CHECKING:
    from .coordinator import TransactionCoordinator

OWNER = "transaction-coordinator"

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26

VERSIONS: dict[int, tuple[int, int]] = {
    ADD_PARTITIONS_TO_TXN: (0, 5),  # v4+: KIP-890 batched form, VerifyOnly (server-only)
    ADD_OFFSETS_TO_TXN: (0, 4),  # v4: TRANSACTION_ABORTABLE known (never sent here, as Kafka)
    END_TXN: (0, 5),  # v4: TRANSACTION_ABORTABLE known, v5: TV2 epoch bump (KIP-890)
}

NONE = 0


def end_txn_transaction_version(api_version: int) -> int:
    """The transaction.version an EndTxn client speaks: v5+ is TV2 (the client's request
    version tells, as Kafka's ``EndTxnRequest.isTransactionV2Enabled``)."""
    return 2 if api_version >= 5 else 0


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
    client_transaction_version: int | None = None,
) -> dict[str, dict[int, int]]:
    """One transaction's AddPartitionsToTxn: topic -> partition -> error.

    Unknown partitions fail the whole request: they get UNKNOWN_TOPIC_OR_PARTITION
    and the others OPERATION_NOT_ATTEMPTED (nothing is added). Otherwise every
    partition carries the coordinator's single answer. Shared by v0-v3 and the v4+
    batched form, whose adds are a TV2 client's (``client_transaction_version`` 2, as
    Kafka's ``transactionVersionForAddPartitionsToTxn``).
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
        client_transaction_version,
    )
    error = fenced_for(version, error, 2)
    return {name: dict.fromkeys(parts, error) for name, parts in wanted.items()}


def verify_partitions(
    coordinator: TransactionCoordinator,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[tuple[str, int]],
    version: int,
) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn VerifyOnly (KIP-890 part 1): is each partition in the
    ongoing transaction of this producer id and epoch? Changes nothing.

    As Kafka's handleVerifyPartitionsInTransaction: unknown id or another producer id
    -> INVALID_PRODUCER_ID_MAPPING, another epoch -> PRODUCER_FENCED, a transaction
    being prepared -> CONCURRENT_TRANSACTIONS; a partition not in an Ongoing
    transaction -> TRANSACTION_ABORTABLE (v5; v4 predates it: INVALID_TXN_STATE).
    """
    wanted = list(dict.fromkeys(partitions))
    if not transactional_id:
        return dict.fromkeys(wanted, int(E.invalid_request))
    error = coordinator.coordinator_error(transactional_id)
    md = coordinator.metadata(transactional_id)
    if not error:
        if md is None or md.producer_id != producer_id:
            error = int(E.invalid_producer_id_mapping)
        elif md.producer_epoch != producer_epoch:
            error = int(E.producer_fenced)
        elif md.state.is_prepare:
            error = int(E.concurrent_transactions)
    if error or md is None:
        return dict.fromkeys(wanted, error)
    missing = int(E.transaction_abortable) if version >= 5 else int(E.invalid_txn_state)
    ongoing = md.state == TxnState.ONGOING
    return {tp: NONE if ongoing and tp in md.partitions else missing for tp in wanted}


class TransactionApis:
    """The request handlers, bound to one coordinator."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.c = coordinator

    async def add_partitions_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.api_version >= 4:
            return await self._add_partitions_batched(ctx, req)
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

    def _exists_or_offsets(self, topic: str, partition: int) -> bool:
        """A broker adds ``__consumer_offsets`` partitions too (TxnOffsetCommit v5), which
        the cluster view does not list (AddOffsetsToTxn adds them without this check)."""
        return topic == GROUP_TOPIC or self.c.partition_exists(topic, partition)

    async def _add_partitions_batched(self, ctx: RequestContext, req: Any) -> Any:
        """AddPartitionsToTxn v4+ (from brokers only; the node refuses clients before
        this runs): several transactions, each verified (VerifyOnly) or added."""
        results = []
        for txn in req.transactions:
            wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
            if txn.verify_only:
                errors = verify_partitions(
                    self.c,
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    wanted,
                    ctx.api_version,
                )
                by_topic: dict[str, dict[int, int]] = {}
                for (name, p), code in errors.items():
                    by_topic.setdefault(name, {})[p] = code
            else:
                if self.c.is_completing(txn.transactional_id):
                    await self.c.wait_if_completing(txn.transactional_id)
                by_topic = partition_results(
                    self.c,
                    self._exists_or_offsets,
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    [(t.name, t.partitions) for t in txn.topics],
                    ctx.api_version,
                    client_transaction_version=2,
                )
            results.append(
                (
                    txn.transactional_id,
                    [(name, list(parts.items())) for name, parts in by_topic.items()],
                )
            )
        codes = tuple(e for _, topics in results for _, parts in topics for _, e in parts if e)
        return ctx.encoded(verify_codecs.add_partitions_to_txn_response(0, results), codes)

    async def add_offsets_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        await self.c.wait_if_completing(req.transactional_id)
        error = self.c.add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
        )
        return ctx.respond(throttle_time=0, error_code=fenced_for(ctx.api_version, error, 2))

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        if self.c.is_completing(req.transactional_id):
            await self.c.wait_if_completing(req.transactional_id)
        result = await self.c.end_transaction(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            bool(req.committed),
            end_txn_transaction_version(ctx.api_version),
        )
        error = fenced_for(ctx.api_version, result.error, 2)
        body = end_txn_response(
            ctx.api_version, error, 0, result.producer_id, result.producer_epoch
        )
        return ctx.encoded(body, (error,) if error else ())

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
    "end_txn_transaction_version",
    "fenced_for",
    "partition_results",
    "register_transaction_apis",
    "verify_partitions",
]
