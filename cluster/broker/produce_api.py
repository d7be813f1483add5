"""Produce v3-v11: validate, append to the local partition, answer per partition.

acks=0 gets no response; if such a produce fails, the connection is closed (as
Kafka does) so the client notices. acks=1 and acks=all are the same here: a
partition has one replica, and the record is in the log (page cache, which
survives kill -9 of the node) before the response is sent.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.hot_codecs import PartitionResult, produce_response
from ..server.dispatch import ApiRegistry, RequestContext
from ..server.server import CloseConnection
from .partition import Partition
from .partition_manager import PartitionManager

INVALID_REQUIRED_ACKS = int(ErrorCode.invalid_required_acks)
INVALID_RECORD = int(ErrorCode.invalid_record)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.not_leader_or_follower)


class ProduceApi:
    def __init__(self, partitions: PartitionManager) -> None:
        self.partitions = partitions

    def register(self, registry: ApiRegistry) -> None:
        registry.register(0, 3, 11, self.handle, owner="broker")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        acks = request.acks
        topics: list[tuple[str, list[PartitionResult]]] = []
        errors: list[int] = []
        if acks not in (0, 1, -1):
            for t in request.topic_data:
                results = [self._error(p.index, INVALID_REQUIRED_ACKS) for p in t.partition_data]
                topics.append((t.name, results))
                errors.extend(INVALID_REQUIRED_ACKS for _ in results)
        else:
            for t in request.topic_data:
                results = []
                for p in t.partition_data:
                    result = self._append(t.name, p.index, p.records)
                    if result is None:  # the partition is not known here yet
                        result = await self._append_after_sync(t.name, p.index, p.records)
                    if result[1]:
                        errors.append(result[1])
                    results.append(result)
                topics.append((t.name, results))
            if acks == 0:
                if errors:
                    raise CloseConnection
                return None
        return ctx.encoded(produce_response(ctx.api_version, topics), tuple(errors))

    def _append(
        self, topic: str, index: int, records: bytes | None, partition: Partition | None = None
    ) -> PartitionResult | None:
        """Append to a partition this node knows; None if it does not know it (yet)."""
        if partition is None:
            partition = self.partitions.partitions.get((topic, index))
            if partition is None:
                return None
        if not records:
            return self._error(index, INVALID_RECORD, "no record batch")
        result = partition.append_records(records)
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

    async def _append_after_sync(
        self, topic: str, index: int, records: bytes | None
    ) -> PartitionResult:
        partition = await self.partitions.get_or_sync(topic, index)
        if partition is None:
            view = self.partitions.source.view()
            meta = view.topic(topic)
            if meta is None or not 0 <= index < meta.num_partitions:
                return self._error(index, UNKNOWN_TOPIC_OR_PARTITION)
            return self._error(index, NOT_LEADER_OR_FOLLOWER)
        result = self._append(topic, index, records, partition)
        assert result is not None
        return result

    @staticmethod
    def _error(index: int, code: int, message: str | None = None) -> PartitionResult:
        return (index, code, -1, -1, -1, (), message)
