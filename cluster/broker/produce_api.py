"""Produce v3-v11: validate, append to the local partition, answer per partition.

acks=0 gets no response; if such a produce fails, the connection is closed (as
Kafka does) so the client notices. acks=1 and acks=all are the same here: a
partition has one replica, and the record is in the log (page cache, which
survives kill -9 of the node) before the response is sent.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..server.dispatch import ApiRegistry, RequestContext
from ..server.server import CloseConnection
from .partition_manager import PartitionManager


class ProduceApi:
    def __init__(self, partitions: PartitionManager) -> None:
        self.partitions = partitions

    def register(self, registry: ApiRegistry) -> None:
        registry.register(0, 3, 11, self.handle, owner="broker")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        acks = request.acks
        if acks not in (0, 1, -1):
            if acks == 0:
                raise CloseConnection
            return ctx.respond(
                throttle_time=0,
                responses=[
                    {
                        "name": t.name,
                        "partition_responses": [
                            self._error(p.index, ErrorCode.invalid_required_acks)
                            for p in t.partition_data
                        ],
                    }
                    for t in request.topic_data
                ],
            )
        topics = []
        failed = False
        for t in request.topic_data:
            results = []
            for p in t.partition_data:
                result = await self._append(t.name, p.index, p.records)
                failed = failed or result["error_code"] != 0
                results.append(result)
            topics.append({"name": t.name, "partition_responses": results})
        if acks == 0:
            if failed:
                raise CloseConnection
            return None
        return ctx.respond(throttle_time=0, responses=topics)

    async def _append(self, topic: str, index: int, records: bytes | None) -> dict[str, Any]:
        partition = await self.partitions.get_or_sync(topic, index)
        if partition is None:
            view = self.partitions.source.view()
            meta = view.topic(topic)
            if meta is None or not 0 <= index < meta.num_partitions:
                return self._error(index, ErrorCode.unknown_topic_or_partition)
            return self._error(index, ErrorCode.not_leader_or_follower)
        if not records:
            return self._error(index, ErrorCode.invalid_record, "no record batch")
        result = partition.append_records(bytes(records))
        if result.error_code == 0:
            self.partitions.notify((topic, index))
        return {
            "index": index,
            "error_code": result.error_code,
            "base_offset": result.base_offset,
            "log_append_time": None,
            "log_start_offset": result.log_start_offset,
            "record_errors": [
                {"batch_index": i, "batch_index_error_message": m}
                for i, m in (result.record_errors or [])
            ],
            "error_message": result.error_message,
        }

    @staticmethod
    def _error(index: int, code: int, message: str | None = None) -> dict[str, Any]:
        return {
            "index": index,
            "error_code": code,
            "base_offset": -1,
            "log_append_time": None,
            "log_start_offset": -1,
            "record_errors": [],
            "error_message": message,
        }
