"""FindCoordinator v0-v6 (v4+ batches keys): a group or transactional id maps to its
internal partition and that partition's coordinator node (see
``cluster/coordinator/placement.py``); the node's address comes from the cluster view,
so a coordinator that is down answers COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..coordinator.placement import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, CoordinatorPlacement
from ..metadata_source import MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext


class FindCoordinatorApi:
    def __init__(
        self, source: MetadataSource, placement: Callable[[], CoordinatorPlacement]
    ) -> None:
        self.source = source
        self.placement = placement

    def register(self, registry: ApiRegistry) -> None:
        registry.register(10, 0, 6, self.handle, owner="cluster_info")

    def lookup(self, key: str, key_type: int) -> dict[str, Any]:
        def error(code: int, message: str) -> dict[str, Any]:
            return {
                "key": key,
                "error_code": code,
                "error_message": message,
                "node_id": -1,
                "host": "",
                "port": -1,
            }

        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
            return error(ErrorCode.invalid_request, f"unknown key type {key_type}")
        owner = self.placement().owner(key_type, key)
        node = self.source.view().nodes.get(owner)
        if node is None:
            return error(
                ErrorCode.coordinator_not_available, f"coordinator node {owner} is not available"
            )
        return {
            "key": key,
            "error_code": 0,
            "error_message": None,
            "node_id": node.node_id,
            "host": node.host,
            "port": node.port,
        }

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
        if ctx.api_version >= 4:
            coordinators = [self.lookup(k, key_type) for k in request.coordinator_keys]
            return ctx.respond(throttle_time=0, coordinators=coordinators)
        return ctx.respond(throttle_time=0, **self.lookup(request.key, key_type))
