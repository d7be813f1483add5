"""Produce v3-v13: validate, append to the local partition, answer per partition.

Produce v13 names topics by id (KIP-516): the ids are resolved to names first (one
metadata refresh for ids the node does not know yet), a topic still unknown is
answered UNKNOWN_TOPIC_ID, and the answer names topics by id again (Kafka's
KafkaApis.handleProduceRequest). Past that a v13 request is a v12 one.

KIP-890 part 1: when verification is on (``transaction.partition.verification.enable``,
at every transaction.version, as Kafka), a transactional batch for a partition where its
producer has no ongoing transaction is appended only after the coordinator confirmed
(AddPartitionsToTxn VerifyOnly, see ``txn_verification``) that the transaction added
the partition. Errors follow Kafka's ReplicaManager: INVALID_TXN_STATE when it did
not; retriable coordinator errors become NOT_ENOUGH_REPLICAS with a message (old
clients retry it without a metadata refresh).

KIP-890 part 2: a Produce v12 (a new client) needs no AddPartitionsToTxn: the broker
has the coordinator add the partition (AddPartitionsToTxn v5 without VerifyOnly) before
the first write of each transaction to it, whatever the setting (the request version
decides, as Kafka's ``produceRequestVersionToTransactionSupportedOperation``; at
transaction.version 0 the coordinator refuses the add with UNSUPPORTED_VERSION and
nothing is written), and refuses
a first write whose sequence is not 0 (OUT_OF_ORDER_SEQUENCE_NUMBER: a new epoch, so a
new transaction, starts at 0). Produce v11+ clients get TRANSACTION_ABORTABLE as it is.

acks=0 gets no response; if such a produce fails, the connection is closed (as
Kafka does) so the client notices. acks=1 and acks=all are the same here: a
partition has one replica, and the record is in the log (page cache, which
survives kill -9 of the node) before the response is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.error_names import error_name
from ..protocol.hot_codecs import PartitionResult, produce_response
from ..protocol.record_batch import ATTRIBUTES_OFFSET, TRANSACTIONAL_BIT, CorruptBatch, parse_header
from ..server.dispatch import ApiRegistry, RequestContext
from ..server.server import CloseConnection
from .partition import Partition
from .partition_manager import PartitionManager
from .txn_verification import Errors, TxnVerifier
from .verification_lookahead import VerificationLookahead, VerifiedAhead
from .verification_state import SENTINEL, VerificationGuard

INVALID_REQUIRED_ACKS = int(ErrorCode.invalid_required_acks)
INVALID_RECORD = int(ErrorCode.invalid_record)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.not_leader_or_follower)
INVALID_TXN_STATE = int(ErrorCode.invalid_txn_state)
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.invalid_producer_id_mapping)
OUT_OF_ORDER_SEQUENCE_NUMBER = int(ErrorCode.out_of_order_sequence_number)
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = int(ErrorCode.transactional_id_authorization_failed)
IMPLICIT_ADD_VERSION = 12  # Produce v12: the client relies on the broker to add partitions
TOPIC_ID_VERSION = 13  # Produce v13: topics named by id (KIP-516)
UNKNOWN_TOPIC_ID = int(ErrorCode.unknown_topic_id)
GENERIC_ERRORS_VERSION = 11  # Produce v11+: TRANSACTION_ABORTABLE is known
NOT_ENOUGH_REPLICAS = int(ErrorCode.not_enough_replicas)
RETRIABLE_VERIFICATION_ERRORS = frozenset(
    int(e)
    for e in (
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    )
)


def has_transactional_records(request: Any) -> bool:
    """Whether any batch of a Produce request has the transactional bit (Kafka's
    RequestUtils.hasTransactionalRecords; only whole v2 batches are read)."""
    for t in request.topic_data:
        for p in t.partition_data:
            records = p.records
            if (
                records
                and len(records) > ATTRIBUTES_OFFSET + 1
                and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_BIT
            ):
                return True
    return False


@dataclass(frozen=True, slots=True)
class NamedTopic:
    """A v13 request's topic with its id resolved to the name (what v3-v12 send)."""

    name: str
    partition_data: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class NamedProduce:
    """A Produce v13 request as v12 would have said it (topics by name)."""

    transactional_id: str | None
    acks: int
    timeout: Any
    topic_data: tuple[NamedTopic, ...]


TopicKey = str | uuid.UUID
"""How a Produce response names a topic: by name (v3-v12) or id (v13+)."""


def verification_failure(index: int, error: int) -> PartitionResult:
    """A failed verification as the producer sees it (Kafka's ReplicaManager)."""
    if error == INVALID_TXN_STATE:
        return (index, error, -1, -1, -1, (), "Partition was not added to the transaction")
    if error in RETRIABLE_VERIFICATION_ERRORS:
        message = (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error_name(error)}"
        )
        return (index, NOT_ENOUGH_REPLICAS, -1, -1, -1, (), message)
    return (index, error, -1, -1, -1, (), None)


class ProduceApi:
    def __init__(
        self,
        partitions: PartitionManager,
        verifier: TxnVerifier | None = None,
        verification_active: Callable[[], bool] = lambda: False,
    ) -> None:
        self.partitions = partitions
        self.verifier = verifier
        self.verification_active = verification_active
        self.lookahead = VerificationLookahead(
            lambda t, i: partitions.partitions.get((t, i)), self._known_topic_name
        )

    def register(self, registry: ApiRegistry) -> None:
        registry.register(0, 3, 13, self.handle, owner="broker")

    def _known_topic_name(self, topic_id: uuid.UUID) -> str | None:
        meta = self.partitions.source.view().topic_by_id(topic_id)
        return None if meta is None else meta.name

    async def _by_name(
        self, request: Any
    ) -> tuple[NamedProduce, dict[str, uuid.UUID], list[tuple[TopicKey, list[PartitionResult]]]]:
        """A v13 request with its topic ids resolved: the request by name, each name's id
        (for the answer), and the answers of the topics whose id is unknown."""
        view = self.partitions.source.view()
        if any(view.topic_by_id(t.topic_id) is None for t in request.topic_data):
            view = await self.partitions.source.refresh()
        named: list[NamedTopic] = []
        ids: dict[str, uuid.UUID] = {}
        unknown: list[tuple[TopicKey, list[PartitionResult]]] = []
        for t in request.topic_data:
            meta = view.topic_by_id(t.topic_id)
            if meta is None:
                results = [self._error(p.index, UNKNOWN_TOPIC_ID) for p in t.partition_data]
                unknown.append((t.topic_id, results))
                continue
            named.append(NamedTopic(meta.name, tuple(t.partition_data)))
            ids[meta.name] = t.topic_id
        tid, acks, timeout = request.transactional_id, request.acks, request.timeout
        return NamedProduce(tid, acks, timeout, tuple(named)), ids, unknown

    @staticmethod
    def _implicit_add(version: int) -> bool:
        return version >= IMPLICIT_ADD_VERSION

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        if ctx.api_version < TOPIC_ID_VERSION:
            return await self._handle(ctx, request, None)
        by_name, ids, unknown = await self._by_name(request)
        if unknown and request.acks == 0:
            raise CloseConnection  # as any failed acks=0 produce
        return await self._handle(ctx, by_name, (ids, unknown))

    async def _handle(
        self,
        ctx: RequestContext,
        request: Any,
        by_id: tuple[dict[str, uuid.UUID], list[tuple[TopicKey, list[PartitionResult]]]] | None,
    ) -> Any:
        """Serve a request whose topics are named (``by_id``: a v13 request's ids, and the
        answers of its unknown ids)."""
        acks = request.acks
        topics: list[tuple[str, list[PartitionResult]]] = []
        errors: list[int] = []
        if not request.transactional_id and has_transactional_records(request):
            # Kafka (KafkaApis.handleProduceRequest): a transactional batch comes with its
            # transactional id (and WRITE on it), else the whole request is refused. Without
            # it anyone could write into another producer's transaction (its producer id
            # and epoch are public through DescribeProducers) or open one with a made-up
            # producer id that no coordinator ever ends, holding the LSO forever.
            if acks == 0:
                raise CloseConnection
            for t in request.topic_data:
                code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                topics.append((t.name, [self._error(p.index, code) for p in t.partition_data]))
                errors.extend(code for _ in t.partition_data)
        elif acks not in (0, 1, -1):
            for t in request.topic_data:
                results = [self._error(p.index, INVALID_REQUIRED_ACKS) for p in t.partition_data]
                topics.append((t.name, results))
                errors.extend(INVALID_REQUIRED_ACKS for _ in results)
        elif (
            request.transactional_id
            and self.verifier is not None
            and (self.verification_active() or self._implicit_add(ctx.api_version))
        ):
            await self._ensure_known(request)
            errors = await self._verified(request, topics, ctx.api_version, ctx)
            if acks == 0:
                if errors:
                    raise CloseConnection
                return None
        else:
            await self._ensure_known(request)
            for t in request.topic_data:
                results = []
                for p in t.partition_data:
                    tid = request.transactional_id
                    result = self._append(t.name, p.index, p.records, transactional_id=tid)
                    if result is None:  # the partition is not here
                        result = self._missing(t.name, p.index)
                    if result[1]:
                        errors.append(result[1])
                    results.append(result)
                topics.append((t.name, results))
            if acks == 0:
                if errors:
                    raise CloseConnection
                return None
        if by_id is None:
            return ctx.encoded(produce_response(ctx.api_version, topics), tuple(errors))
        ids, unknown = by_id
        keyed: list[tuple[TopicKey, list[PartitionResult]]] = [
            (ids[name], results) for name, results in topics
        ]
        keyed.extend(unknown)
        errors.extend(UNKNOWN_TOPIC_ID for _, results in unknown for _ in results)
        return ctx.encoded(produce_response(ctx.api_version, keyed), tuple(errors))

    async def _ensure_known(self, request: Any) -> None:
        """One view refresh for the whole request, whatever it names (see ensure_known)."""
        await self.partitions.ensure_known(
            (t.name, p.index) for t in request.topic_data for p in t.partition_data
        )

    async def _verified(
        self,
        request: Any,
        topics: list[tuple[str, list[PartitionResult]]],
        version: int,
        ctx: RequestContext,
    ) -> list[int]:
        """A transactional produce with verification on (or a v12 produce):
        verify (or add) the partitions that need it, in one request to the
        coordinator, then append; fills ``topics``."""
        add = self._implicit_add(version)
        early = self.lookahead.take(ctx.frame)
        failed: dict[tuple[str, int], int] = {}
        found: dict[tuple[str, int], Partition] = {}
        guards: dict[tuple[str, int], VerificationGuard] = {}
        producers: set[tuple[int, int]] = set()
        for t in request.topic_data:
            for p in t.partition_data:
                partition = self.partitions.get(t.name, p.index)
                if partition is None or not p.records:
                    continue
                found[(t.name, p.index)] = partition
                try:
                    header = parse_header(p.records)
                except CorruptBatch:
                    continue  # the append refuses it
                if header.is_transactional and header.has_producer_id:
                    producers.add((header.producer_id, header.producer_epoch))
                    guard = partition.start_verification(
                        header.producer_id, header.producer_epoch, epoch_bump=add
                    )
                    # a new transaction starts at sequence 0 (KIP-890); a stale epoch goes
                    # on to the coordinator, which fences it, as Kafka's epoch check comes first
                    if (
                        add
                        and guard is not SENTINEL
                        and header.base_sequence != 0
                        and not partition.has_newer_epoch(header.producer_id, header.producer_epoch)
                    ):
                        failed[(t.name, p.index)] = OUT_OF_ORDER_SEQUENCE_NUMBER
                        continue
                    guards[(t.name, p.index)] = guard
        if len(producers) > 1:  # Kafka: "contained more than one producer ID"
            failed = dict.fromkeys(list(guards) + list(failed), INVALID_PRODUCER_ID_MAPPING)
        else:
            wanted = [key for key, guard in guards.items() if guard is not SENTINEL]
            if wanted:
                ((pid, epoch),) = producers
                failed.update(
                    await self._verify(ctx, request, pid, epoch, wanted, guards, add, early)
                )
        errors: list[int] = []
        for t in request.topic_data:
            results: list[PartitionResult] = []
            for p in t.partition_data:
                key = (t.name, p.index)
                if key in failed:
                    result = verification_failure(p.index, failed[key])
                else:
                    partition = found.get(key)
                    tid = request.transactional_id
                    if partition is None:
                        result = self._missing(t.name, p.index)
                    else:
                        held = guards.get(key)
                        appended = self._append(t.name, p.index, p.records, partition, held, tid)
                        assert appended is not None
                        result = appended
                if result[1]:
                    errors.append(result[1])
                results.append(result)
            topics.append((t.name, results))
        return errors

    async def _verify(
        self,
        ctx: RequestContext,
        request: Any,
        pid: int,
        epoch: int,
        wanted: list[tuple[str, int]],
        guards: dict[tuple[str, int], VerificationGuard],
        add: bool,
        early: VerifiedAhead | None,
    ) -> Errors:
        """Verify (or add) ``wanted``; a verify-only check also takes the partitions of the
        Produce requests pipelined behind this one (``verification_lookahead``), and skips
        those verified ahead together with an earlier request."""
        assert self.verifier is not None
        ahead = []
        if not add:
            before = early.guards_for(pid, epoch) if early is not None else {}
            wanted = [key for key in wanted if before.get(key) is not guards[key]]
            if not wanted:
                return {}
            ahead = self.lookahead.pipelined(ctx.pipelined, request.transactional_id, pid, epoch)
        asked = set(wanted)
        extra = [a.partition for a in ahead if a.partition not in asked]
        failed = await self.verifier.verify(
            request.transactional_id,
            pid,
            epoch,
            wanted + list(dict.fromkeys(extra)),
            verify_only=not add,
            generic_errors=ctx.api_version >= GENERIC_ERRORS_VERSION,
        )
        if ahead:
            self.lookahead.keep(ahead, failed, pid, epoch)
        return {key: code for key, code in failed.items() if key in asked}

    def _append(
        self,
        topic: str,
        index: int,
        records: bytes | None,
        partition: Partition | None = None,
        verification: VerificationGuard | None = None,
        transactional_id: str | None = None,
    ) -> PartitionResult | None:
        """Append to a partition this node knows; None if it does not know it (yet)."""
        if partition is None:
            partition = self.partitions.partitions.get((topic, index))
            if partition is None:
                return None
        if not records:
            return self._error(index, INVALID_RECORD, "no record batch")
        result = partition.append_records(records, verification, transactional_id)
        if result.error_code == 0:
            self.partitions.notify((topic, index))
        return (
            index,
            result.error_code,
            result.base_offset,
            -1,  # log append time: CreateTime topics only
            result.log_start_offset,
            result.record_errors or (),
            result.error_message,
        )

    def _missing(self, topic: str, index: int) -> PartitionResult:
        """The answer for a partition this node does not have (after the request's
        refresh): unknown to the cluster, or led by another node."""
        meta = self.partitions.source.view().topic(topic)
        if meta is None or not 0 <= index < meta.num_partitions:
            return self._error(index, UNKNOWN_TOPIC_OR_PARTITION)
        return self._error(index, NOT_LEADER_OR_FOLLOWER)

    @staticmethod
    def _error(index: int, code: int, message: str | None = None) -> PartitionResult:
        return (index, code, -1, -1, -1, (), message)
