"""Fetch v4-v18: topic names (v4-v12) or topic ids (v13+), long poll, size limits.

v17 (the follower's directory id, KIP-853) and v18 (the follower's high watermark,
KIP-1166) add tagged fields a replica fetch may send; a consumer's fetch is v16's.

The response is built once there is at least ``min_bytes`` of data, an error to
report, or ``max_wait`` has passed; in between the request sleeps until an append
to one of its partitions wakes it. Limits follow KIP-74: partitions are filled in
request order up to ``max_bytes`` and ``partition_max_bytes``, but the first
partition with data always returns at least one whole batch so a consumer cannot
get stuck behind a batch larger than its limits. No fetch sessions: the response
always carries session id 0, which tells clients to send full fetch requests.

A request's ``max_bytes`` is cut to ``fetch.max.bytes`` (``replica.fetch.response.max.bytes``
for a replica's fetch), as Kafka bounds it: responses are built in memory here, and ten
slow clients asking for INT32_MAX bytes of a 99 MB partition took a node from 57 MB to
964 MB (issue 35). A connection holds one response at a time (the server answers in
order and stops reading while its client does not read).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ..server.dispatch import ApiRegistry, RequestContext
from ..server.server import CloseConnection
from .partition_manager import PartitionManager

READ_COMMITTED = 1


class FetchApi:
    def __init__(
        self,
        partitions: PartitionManager,
        max_bytes: int = 57_671_680,
        replica_max_bytes: int = 10_485_760,
    ) -> None:
        self.partitions = partitions
        self.max_bytes = max_bytes  # fetch.max.bytes
        self.replica_max_bytes = replica_max_bytes  # replica.fetch.response.max.bytes

    def register(self, registry: ApiRegistry) -> None:
        registry.register(1, 4, 18, self.handle, owner="broker")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        by_id = ctx.api_version >= 13
        loop = asyncio.get_running_loop()
        max_wait = request.max_wait.total_seconds()
        deadline = loop.time() + max_wait
        if getattr(request, "isolation_level", 0) not in (0, READ_COMMITTED):
            # Kafka's IsolationLevel.forId refuses it while parsing: the connection closes
            # (it was served as read_uncommitted, showing what read_committed hides).
            raise CloseConnection
        keys = await self._resolve(request, by_id)
        replica = request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id
        limit = self.replica_max_bytes if replica >= 0 else self.max_bytes
        max_bytes = min(request.max_bytes, limit)
        while True:
            topics, total, errors = self._read(request, keys, by_id, max_bytes)
            remaining = deadline - loop.time()
            if total >= request.min_bytes or errors or remaining <= 0 or not keys:
                return ctx.respond(throttle_time=0, error_code=0, session_id=0, responses=topics)
            await self.partitions.wait_for_data([k for k in keys.values() if k], remaining)

    async def _resolve(self, request: Any, by_id: bool) -> dict[tuple[int, int], Any]:
        """(topic position, partition) -> (topic name, index), or None when unknown."""
        view = self.partitions.source.view()
        keys: dict[tuple[int, int], Any] = {}
        refreshed = False
        for ti, t in enumerate(request.topics):
            for p in t.partitions:
                name = None
                meta = view.topic_by_id(t.topic_id) if by_id else view.topic(t.topic)
                if meta is None and not refreshed:
                    view = await self.partitions.source.refresh()
                    refreshed = True
                    meta = view.topic_by_id(t.topic_id) if by_id else view.topic(t.topic)
                if meta is not None:
                    name = meta.name
                keys[(ti, p.partition)] = (name, p.partition) if name else None
        return keys

    def _read(
        self, request: Any, keys: dict, by_id: bool, max_bytes: int
    ) -> tuple[list, int, bool]:
        remaining = max_bytes
        total = 0
        errors = False
        isolation = getattr(request, "isolation_level", 0)
        view = self.partitions.source.view()
        topics = []
        for ti, t in enumerate(request.topics):
            parts = []
            for p in t.partitions:
                key = keys[(ti, p.partition)]
                entry: dict[str, Any] = {
                    "partition_index": p.partition,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                partition = self.partitions.get(*key) if key else None
                if partition is None:
                    errors = True
                    if key is None:
                        entry["error_code"] = (
                            ErrorCode.unknown_topic_id
                            if by_id
                            else ErrorCode.unknown_topic_or_partition
                        )
                    else:
                        meta = view.topic(key[0])
                        in_range = meta is not None and 0 <= key[1] < meta.num_partitions
                        entry["error_code"] = (
                            ErrorCode.not_leader_or_follower
                            if in_range
                            else ErrorCode.unknown_topic_or_partition
                        )
                    if entry["error_code"] != ErrorCode.not_leader_or_follower:
                        # Kafka answers what its metadata refuses before reading with the
                        # message's defaults: an empty (not null) aborted list
                        entry["aborted_transactions"] = []
                    parts.append(entry)
                    continue
                limit = min(p.partition_max_bytes, max(remaining, 0))
                result = partition.read(
                    p.fetch_offset, limit, isolation_level=isolation, min_one_batch=total == 0
                )
                entry.update(
                    error_code=result.error_code,
                    high_watermark=result.high_watermark,
                    last_stable_offset=result.last_stable_offset,
                    log_start_offset=result.log_start_offset,
                    records=result.records,
                    aborted_transactions=[
                        {"producer_id": pid, "first_offset": first}
                        for pid, first in result.aborted_transactions
                    ]
                    if isolation == READ_COMMITTED
                    else None,
                )
                if result.error_code != 0:
                    errors = True
                size = len(result.records)
                total += size
                remaining -= size
                parts.append(entry)
            topics.append(
                {
                    "topic": getattr(t, "topic", None),
                    "topic_id": getattr(t, "topic_id", None),
                    "partitions": parts,
                }
            )
        return topics, total, errors
