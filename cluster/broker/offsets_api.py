"""ListOffsets v1-v11 (earliest, latest, max timestamp, by timestamp; read_committed
"latest" is the last stable offset) and DeleteRecords v0-v2 (advances the log start
offset).

Versions 8-11 add tiered storage's targets (KIP-405 earliest local -4, KIP-1005 latest
tiered -5, KIP-1023 earliest pending upload -6) and a timeout for remote reads (v10,
KIP-1075). Without tiered storage Kafka answers -4 as the log start offset and -5/-6
with offset -1 (UnifiedLog.fetchOffsetByTimestamp); ``Partition.list_offset`` does the
same, and the timeout has nothing to wait for. A negative target the request's version
does not know (or no version knows) is UNSUPPORTED_VERSION for its partition, as Kafka's
ReplicaManager.isListOffsetsTimestampUnsupported."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..server.dispatch import ApiRegistry, RequestContext
from .partition_manager import PartitionManager

#: the first ListOffsets version of each negative target: latest, earliest, max timestamp
#: (KIP-734), earliest local (KIP-405), latest tiered (KIP-1005), earliest pending upload
#: (KIP-1023)
TARGET_SINCE = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9, -6: 11}


def target_unsupported(timestamp: int, version: int) -> bool:
    return timestamp < 0 and version < TARGET_SINCE.get(timestamp, 1 << 15)


class OffsetsApi:
    def __init__(self, partitions: PartitionManager) -> None:
        self.partitions = partitions

    def register(self, registry: ApiRegistry) -> None:
        registry.register(2, 1, 11, self.list_offsets, owner="broker")
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
                refused = target_unsupported(p.timestamp, ctx.api_version)
                if partition is None or refused:
                    code = (
                        ErrorCode.unsupported_version
                        if refused
                        else await self._missing(t.name, p.partition_index)
                    )
                    parts.append(
                        {
                            "partition_index": p.partition_index,
                            "error_code": code,
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
