"""DescribeProducers v0 (KIP-664): the active producers of each partition this broker
holds, with the first offset of any open transaction — what ``transactions
find-hanging`` compares against the coordinators' view."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..server.dispatch import ApiRegistry, RequestContext
from .partition_manager import PartitionManager


class DescribeProducersApi:
    def __init__(self, partitions: PartitionManager) -> None:
        self.partitions = partitions

    def register(self, registry: ApiRegistry) -> None:
        registry.register(61, 0, 0, self.handle, owner="broker")

    def _partition(self, topic: str, index: int) -> dict[str, Any]:
        partition = self.partitions.get(topic, index)
        if partition is None:
            meta = self.partitions.source.view().topic(topic)
            known = meta is not None and 0 <= index < meta.num_partitions
            return {
                "partition_index": index,
                "error_code": ErrorCode.not_leader_or_follower
                if known
                else ErrorCode.unknown_topic_or_partition,
                "error_message": None,
                "active_producers": [],
            }
        producers = [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "last_sequence": e.last_seq,
                "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": -1
                if e.current_txn_first_offset is None
                else e.current_txn_first_offset,
            }
            for e in sorted(
                partition.producer_state.producers.values(), key=lambda e: e.producer_id
            )
        ]
        return {
            "partition_index": index,
            "error_code": 0,
            "error_message": None,
            "active_producers": producers,
        }

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        return ctx.respond(
            throttle_time=0,
            topics=[
                {
                    "name": t.name,
                    "partitions": [self._partition(t.name, p) for p in t.partition_indexes],
                }
                for t in request.topics
            ],
        )
