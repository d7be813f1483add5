"""Producer-id blocks: where every node's InitProducerId gets its ids.

Producer ids come in blocks from the controller (AllocateProducerIds), which
persists the next block before answering, so an id is never handed out twice, even
across restarts.
"""

from __future__ import annotations

import asyncio

from .metadata_source import MetadataSource


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
