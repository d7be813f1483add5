"""UpdateFeatures (57) on a node without the controller: forwarded to the
controller (as a Kafka broker forwards it), answered with the controller's answer
once this node has pulled the change."""

from __future__ import annotations

from typing import Any

from ..metadata_source import MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext


class ForwardedUpdateFeatures:
    def __init__(self, source: MetadataSource) -> None:
        self.source = source

    def register(self, registry: ApiRegistry) -> None:
        registry.register(57, 0, 2, self.handle, owner="cluster_info")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        response = await self.source.forward(request)
        if response is None:  # cannot happen on a node whose source is remote
            raise RuntimeError("UpdateFeatures reached a node that cannot forward it")
        return response
