"""WriteTxnMarkers (API 27) v1-v2: the transaction coordinator ends a transaction on
the partitions it touched (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

For each marker, partitions of ``__consumer_offsets`` go to the group coordinator
(``group_sink``: it makes pending transactional offset commits visible or drops them);
every other partition gets a COMMIT/ABORT control batch through
``Partition.write_txn_marker``, which fences stale producer and coordinator epochs,
completes the producer's transaction, moves the LSO and indexes aborts. Fetches that
long-poll on a partition are woken after its marker is written, since a commit makes
data visible to read_committed consumers.

v0 is not offered: it is gone from Kafka 4's schemas (and from kio). v2 adds the
marker's transaction version, which selects the TV2 epoch rule.

A marker whose coordinator epoch is -1 is an operator's (KIP-664's admin form: no
coordinator ever has epoch -1) and follows the stricter admin rules of
``ProducerStateManager.validate_admin_marker``: an open transaction, the producer's latest
epoch exactly, no coordinator fencing. Every other marker follows a coordinator's rules,
whoever sends it, as in Kafka, whose broker does not tell an operator's marker from a
coordinator's: Kafka's ``kafka-transactions.sh abort`` (and ``txnchaos transactions
abort``) sends the producer's coordinator epoch from DescribeProducers. Who may send
markers is Kafka's rule too: anyone on a cluster without an authorizer, else ALTER or
CLUSTER_ACTION on the cluster (``security/rules.py``); no client id is special. The
seed's TxnStartOffset field never entered Kafka's schema (Kafka 4's v1/v2 carry
partition indexes only), so the start offset is checked by the tool against
DescribeProducers just before the abort, as Kafka's tool does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.hot_codecs import write_txn_markers_response
from ..server.dispatch import ApiRegistry, RequestContext
from .partition import Partition, TxnMarker
from .partition_manager import PartitionManager

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"
NONE = 0

ADMIN_COORDINATOR_EPOCH = -1
"""The coordinator epoch of an operator's marker (KIP-664)."""

GroupSink = Callable[[int, int, bool, list[int]], Awaitable[dict[int, int]]]
"""(producer_id, producer_epoch, commit, partition indexes) -> {partition: error code}."""


class WriteTxnMarkersApi:
    def __init__(self, partitions: PartitionManager | None, group_sink: GroupSink | None) -> None:
        self.partitions = partitions
        self.group_sink = group_sink

    def register(self, registry: ApiRegistry) -> None:
        registry.register(27, 1, 2, self.handle, owner="broker")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        markers: list[tuple[int, list[tuple[str, list[tuple[int, int]]]]]] = []
        # The markers for partitions this node has, by partition, in request order:
        # written partition by partition (a partition's markers in one write).
        known: dict[tuple[str, int], list[tuple[TxnMarker, list[tuple[int, int]], int]]] = {}
        # The others (group coordinator, partitions not known yet): may wait, go after.
        later: list[tuple[Any, str, list[tuple[int, int]], list[tuple[int, int]]]] = []
        for marker in request.markers:
            topics: list[tuple[str, list[tuple[int, int]]]] = []
            for t in marker.topics:
                indexes = [int(i) for i in t.partition_indexes]
                results = [(i, NONE) for i in indexes]
                topics.append((t.name, results))
                if t.name == GROUP_METADATA_TOPIC or self.partitions is None:
                    later.append((marker, t.name, list(enumerate(indexes)), results))
                    continue
                spec: TxnMarker | None = None
                for pos, i in enumerate(indexes):
                    if (t.name, i) not in self.partitions.partitions:
                        later.append((marker, t.name, [(pos, i)], results))
                        continue
                    if spec is None:
                        spec = _marker(marker)
                    known.setdefault((t.name, i), []).append((spec, results, pos))
            markers.append((marker.producer_id, topics))
        for tp, entries in known.items():
            self._write_known(tp, entries)
        unknown = [
            (n, i) for _, n, slots, _ in later if n != GROUP_METADATA_TOPIC for _, i in slots
        ]
        if unknown and self.partitions is not None:  # one view refresh for all of them
            await self.partitions.ensure_known(unknown)
        for marker, name, slots, results in later:
            await self._write_later(marker, name, slots, results)
        errors = tuple(code for _, ts in markers for _, rs in ts for _, code in rs if code)
        return ctx.encoded(write_txn_markers_response(ctx.api_version, markers), errors)

    def _write_known(
        self,
        tp: tuple[str, int],
        entries: list[tuple[TxnMarker, list[tuple[int, int]], int]],
    ) -> None:
        """Write the markers for a partition this node has, filling in their results."""
        assert self.partitions is not None
        partition = self.partitions.partitions[tp]
        codes = partition.write_txn_markers([spec for spec, _, _ in entries])
        for (_, results, pos), code in zip(entries, codes, strict=True):
            results[pos] = (tp[1], code)
        if any(code == NONE for code in codes):
            self.partitions.notify(tp)

    async def _write_later(
        self,
        marker: Any,
        name: str,
        slots: list[tuple[int, int]],
        results: list[tuple[int, int]],
    ) -> None:
        """Markers that may wait: for ``__consumer_offsets`` partitions (the group
        coordinator) and for partitions this node does not know yet (after a sync).
        ``slots``: (position in ``results``, partition index)."""
        if name == GROUP_METADATA_TOPIC:
            codes = await self._to_groups(marker, [i for _, i in slots])
            for pos, i in slots:
                results[pos] = (i, codes[i])
            return
        for pos, i in slots:
            results[pos] = (i, await self._write(name, i, marker))

    async def _to_groups(self, marker: Any, indexes: list[int]) -> dict[int, int]:
        if self.group_sink is None:
            return {i: ErrorCode.not_leader_or_follower.value for i in indexes}
        try:
            result = await self.group_sink(
                int(marker.producer_id),
                int(marker.producer_epoch),
                bool(marker.transaction_result),
                indexes,
            )
        except Exception:
            log.exception("group coordinator failed to complete transaction markers")
            return {i: ErrorCode.unknown_server_error.value for i in indexes}
        return {i: int(result.get(i, ErrorCode.not_leader_or_follower.value)) for i in indexes}

    async def _write(self, topic: str, index: int, marker: Any) -> int:
        if self.partitions is None:
            return ErrorCode.not_leader_or_follower.value
        partition = self.partitions.get(topic, index)
        if partition is None:
            meta = self.partitions.source.view().topic(topic)
            if meta is None or not 0 <= index < meta.num_partitions:
                return ErrorCode.unknown_topic_or_partition.value
            return ErrorCode.not_leader_or_follower.value
        return self._write_to(partition, topic, index, marker)

    def _write_to(self, partition: Partition, topic: str, index: int, marker: Any) -> int:
        assert self.partitions is not None
        code = partition.write_txn_markers([_marker(marker)])[0]
        if code == 0:
            self.partitions.notify((topic, index))
        return code


def _marker(marker: Any) -> TxnMarker:
    """A WriteTxnMarkers marker as the partition takes it (coordinator epoch -1: an
    operator's)."""
    coordinator_epoch = int(marker.coordinator_epoch)
    return TxnMarker(
        int(marker.producer_id),
        int(marker.producer_epoch),
        coordinator_epoch,
        bool(marker.transaction_result),
        int(getattr(marker, "transaction_version", 0)),
        coordinator_epoch == ADMIN_COORDINATOR_EPOCH,
    )
