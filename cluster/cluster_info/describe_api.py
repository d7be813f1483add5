"""DescribeCluster v0-v1 and DescribeConfigs v1-v4 (topic and broker resources)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..controller.topic_config import effective_topic_configs
from ..metadata_source import MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext
from ..settings import SPECS, NodeSettings, render_setting
from .metadata_api import ALL_CLUSTER_OPERATIONS, AUTHORIZED_OPERATIONS_OMITTED

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
CONFIG_TYPE = {bool: 1, str: 2, int: 5}


class DescribeApis:
    def __init__(self, source: MetadataSource, settings: NodeSettings, node_id: int) -> None:
        self.source = source
        self.settings = settings
        self.node_id = node_id

    def register(self, registry: ApiRegistry) -> None:
        registry.register(60, 0, 1, self.describe_cluster, owner="cluster_info")
        registry.register(32, 1, 4, self.describe_configs, owner="cluster_info")

    async def describe_cluster(self, ctx: RequestContext, request: Any) -> Any:
        view = self.source.view()
        return ctx.respond(
            throttle_time=0,
            error_code=0,
            endpoint_type=getattr(request, "endpoint_type", 1),
            cluster_id=view.cluster_id,
            controller_id=view.controller_id,
            brokers=[
                {"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": None}
                for n in sorted(view.nodes.values(), key=lambda n: n.node_id)
            ],
            cluster_authorized_operations=ALL_CLUSTER_OPERATIONS
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED,
        )

    async def describe_configs(self, ctx: RequestContext, request: Any) -> Any:
        results = []
        for resource in request.resources:
            keys = resource.configuration_keys
            wanted = None if keys is None else set(keys)
            result: dict[str, Any] = {
                "error_code": 0,
                "error_message": None,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
                "configs": [],
            }
            if resource.resource_type == RESOURCE_TOPIC:
                overrides = await self.source.topic_configs(resource.resource_name)
                if overrides is None:
                    result["error_code"] = ErrorCode.unknown_topic_or_partition
                    result["error_message"] = (
                        f"Topic {_shown(resource.resource_name)} does not exist"
                    )
                else:
                    for name, (value, is_default) in effective_topic_configs(
                        overrides, self.settings
                    ).items():
                        if wanted is None or name in wanted:
                            source = SOURCE_DEFAULT if is_default else SOURCE_DYNAMIC_TOPIC
                            result["configs"].append(self._entry(name, value, source, str))
            elif resource.resource_type == RESOURCE_BROKER:
                if resource.resource_name not in ("", str(self.node_id)):
                    result["error_code"] = ErrorCode.invalid_request
                    asked = _shown(resource.resource_name)
                    result["error_message"] = (
                        f"this is node {self.node_id}; ask node {asked} itself"
                    )
                else:
                    for name, value in self.settings.items():
                        if wanted is None or name in wanted:
                            spec = SPECS[name]
                            source = (
                                SOURCE_DEFAULT if value == spec.default else SOURCE_STATIC_BROKER
                            )
                            result["configs"].append(
                                self._entry(name, render_setting(value), source, spec.kind)
                            )
            else:
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = f"resource type {resource.resource_type} is not supported"
            results.append(result)
        return ctx.respond(throttle_time=0, results=results)

    @staticmethod
    def _entry(name: str, value: str, source: int, kind: type) -> dict[str, Any]:
        return {
            "name": name,
            "value": value,
            "read_only": source != SOURCE_DYNAMIC_TOPIC,
            "is_default": source == SOURCE_DEFAULT,
            "config_source": source,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": CONFIG_TYPE.get(kind, 2),
            "documentation": None,
        }


def _shown(name: str, limit: int = 255) -> str:
    """A client's resource name as an error message quotes it: cut, so that the message
    fits a STRING (32,767 bytes) whatever the name's length (a 32,767-character name
    made the error reply unencodable: a traceback and a closed connection)."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
