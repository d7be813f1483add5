"""ListOffsets v1-v7 (earliest, latest, max timestamp, by timestamp; read_committed
"latest" is the last stable offset) and DeleteRecords v0-v2 (advances the log start
offset)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..server.dispatch import ApiRegistry, RequestContext
from .partition_manager import PartitionManager


class OffsetsApi:
    def __init__(self, partitions: PartitionManager) -> None:
        self.partitions = partitions

    def register(self, registry: ApiRegistry) -> None:
        registry.register(2, 1, 7, self.list_offsets, owner="broker")
        registry.register(21, 0, 2, self.delete_records, owner="broker")

    async def _missing(self, topic: str, index: int) -> int:
        meta = self.partitions.source.view().topic(topic)
        if meta is None or not 0 <= index < meta.num_partitions:
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.not_leader_or_follower

    async def list_offsets(self, ctx: RequestContext, request: Any) -> Any:
        isolation = getattr(request, "isolation_level", 0)
        await self.partitions.ensure_known(
            (t.name, p.partition_index) for t in request.topics for p in t.partitions
        )
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                partition = self.partitions.get(t.name, p.partition_index)
                if partition is None:
                    parts.append(
                        {
                            "partition_index": p.partition_index,
                            "error_code": await self._missing(t.name, p.partition_index),
                            "timestamp": -1,
                            "offset": -1,
                            "leader_epoch": -1,
                        }
                    )
                    continue
                code, offset, ts = partition.list_offset(p.timestamp, isolation)
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": code,
                        "timestamp": ts,
                        "offset": offset,
                        "leader_epoch": 0 if offset >= 0 else -1,
                    }
                )
            topics.append({"name": t.name, "partitions": parts})
        return ctx.respond(throttle_time=0, topics=topics)

    async def delete_records(self, ctx: RequestContext, request: Any) -> Any:
        await self.partitions.ensure_known(
            (t.name, p.partition_index) for t in request.topics for p in t.partitions
        )
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                partition = self.partitions.get(t.name, p.partition_index)
                if partition is None:
                    code, low = await self._missing(t.name, p.partition_index), -1
                else:
                    code, low = partition.delete_records(p.offset)
                parts.append(
                    {"partition_index": p.partition_index, "low_watermark": low, "error_code": code}
                )
            topics.append({"name": t.name, "partitions": parts})
        return ctx.respond(throttle_time=0, topics=topics)
