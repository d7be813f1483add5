"""InitProducerId for idempotent (non-transactional) producers, and the producer-id
blocks behind it.

Producer ids come in blocks from the controller (AllocateProducerIds), which
persists the next block before answering, so an id is never handed out twice, even
across restarts. Transactional ids belong to the transaction coordinator.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ..metadata_source import MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext


class ProducerIdBlocks:
    def __init__(self, source: MetadataSource) -> None:
        self.source = source
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                start, length = await self.source.allocate_producer_ids()
                self._next, self._end = start, start + length
            pid = self._next
            self._next += 1
            return pid


class IdempotentInitProducerIdApi:
    def __init__(self, blocks: ProducerIdBlocks) -> None:
        self.blocks = blocks

    def register(self, registry: ApiRegistry) -> None:
        registry.register(22, 0, 4, self.handle, owner="broker")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        if request.transactional_id is not None:
            return ctx.respond(
                throttle_time=0,
                error_code=ErrorCode.coordinator_not_available,
                producer_id=-1,
                producer_epoch=-1,
            )
        try:
            pid = await self.blocks.next_id()
        except OSError:
            return ctx.respond(
                throttle_time=0,
                error_code=ErrorCode.coordinator_load_in_progress,
                producer_id=-1,
                producer_epoch=-1,
            )
        return ctx.respond(throttle_time=0, error_code=0, producer_id=pid, producer_epoch=0)
