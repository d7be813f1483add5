"""FindCoordinator v0-v6 (v4+ batches keys). Group keys map to the node hosting the
group coordinator. Transaction keys (key type 1) arrive with the transactions work."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..metadata_source import CoordinatorLookupError, MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


class FindCoordinatorApi:
    def __init__(self, source: MetadataSource) -> None:
        self.source = source

    def register(self, registry: ApiRegistry) -> None:
        registry.register(10, 0, 6, self.handle, owner="cluster_info")

    async def _lookup(self, key: str, key_type: int) -> dict[str, Any]:
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
            return {
                "key": key,
                "error_code": ErrorCode.invalid_request,
                "error_message": f"unknown key type {key_type}",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        try:
            node = await self.source.find_coordinator(key, key_type)
        except CoordinatorLookupError as exc:
            return {
                "key": key,
                "error_code": exc.code,
                "error_message": str(exc),
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        except OSError as exc:
            return {
                "key": key,
                "error_code": ErrorCode.coordinator_not_available,
                "error_message": str(exc),
                "node_id": -1,
                "host": "",
                "port": -1,
            }
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
            coordinators = [await self._lookup(k, key_type) for k in request.coordinator_keys]
            return ctx.respond(throttle_time=0, coordinators=coordinators)
        one = await self._lookup(request.key, key_type)
        return ctx.respond(throttle_time=0, **one)
