"""DescribeCluster v0-v1 and DescribeConfigs v1-v4 (topic and broker resources)."""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from ..controller.topic_config import effective_topic_configs
from ..metadata_source import MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext
from ..settings import NodeSettings
from .config_entries import broker_entry, topic_entry
from .metadata_api import ALL_CLUSTER_OPERATIONS, AUTHORIZED_OPERATIONS_OMITTED

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
#: the resource types Kafka 4.4's DescribeConfigs knows (ConfigResource.Type): TOPIC,
#: BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP. A request naming any other is refused
#: whole (every resource INVALID_REQUEST), as Kafka refuses it before reading any
KNOWN_RESOURCE_TYPES = frozenset({2, 4, 8, 16, 32})
#: Kafka's default message of INVALID_REQUEST (Errors.INVALID_REQUEST), which a refused
#: request's every result carries
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library "
    "or the message was sent to an incompatible broker. See the broker logs for more details."
)
#: Kafka's longest topic name (Topic.MAX_NAME_LENGTH)
MAX_TOPIC_NAME = 249
LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt reads (ASCII digits)


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
        """Kafka's ConfigHelper: per resource, its configs (all of them when the request
        names no keys, null or an empty list; keys the resource does not have are left
        out), or an error of its own."""
        if any(r.resource_type not in KNOWN_RESOURCE_TYPES for r in request.resources):
            return ctx.respond(
                throttle_time=0,
                results=[
                    self._result(r, ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE)
                    for r in request.resources
                ],
            )
        synonyms = bool(request.include_synonyms)
        documentation = bool(getattr(request, "include_documentation", False))
        results = []
        for resource in request.resources:
            keys = resource.configuration_keys
            wanted = set(keys) if keys else None  # null or [] asks for every config
            if resource.resource_type == RESOURCE_TOPIC:
                result = await self._topic(resource, wanted, synonyms, documentation)
            elif resource.resource_type == RESOURCE_BROKER:
                result = self._broker(resource, wanted, synonyms, documentation)
            else:  # BROKER_LOGGER, CLIENT_METRICS, GROUP: Kafka's, not the project's
                result = self._result(
                    resource,
                    ErrorCode.invalid_request,
                    f"resource type {resource.resource_type} is not supported by txnchaos "
                    "nodes (topic and broker configs are)",
                )
            results.append(result)
        return ctx.respond(throttle_time=0, results=results)

    async def _topic(
        self, resource: Any, wanted: set[str] | None, synonyms: bool, documentation: bool
    ) -> dict[str, Any]:
        name = resource.resource_name
        problem = _topic_name_problem(name)
        if problem is not None:
            return self._result(
                resource, ErrorCode.invalid_topic_exception, f"Topic name is invalid: {problem}"
            )
        overrides = await self.source.topic_configs(name)
        if overrides is None:  # Kafka says no more than the code
            return self._result(resource, ErrorCode.unknown_topic_or_partition, "")
        configs = [
            topic_entry(
                key,
                value,
                overrides,
                self.settings,
                include_synonyms=synonyms,
                include_documentation=documentation,
            )
            for key, (value, _) in effective_topic_configs(overrides, self.settings).items()
            if wanted is None or key in wanted
        ]
        return self._result(resource, ErrorCode.none, "", configs)

    def _broker(
        self, resource: Any, wanted: set[str] | None, synonyms: bool, documentation: bool
    ) -> dict[str, Any]:
        name = resource.resource_name
        if not name:
            # the cluster-wide dynamic defaults: the project's nodes have none
            return self._result(resource, ErrorCode.none, "", [])
        if _JAVA_INT.fullmatch(name) is None or not -(2**31) <= int(name) < 2**31:
            return self._result(
                resource,
                ErrorCode.invalid_request,
                f"Broker id must be an integer, but it is: {_shown(name)}",
            )
        if int(name) != self.node_id:
            return self._result(
                resource,
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {self.node_id} or empty string, "
                f"but received {_shown(name)}",
            )
        configs = [
            broker_entry(
                key,
                self.settings,
                include_synonyms=synonyms,
                include_documentation=documentation,
            )
            for key, _ in self.settings.items()
            if wanted is None or key in wanted
        ]
        return self._result(resource, ErrorCode.none, "", configs)

    @staticmethod
    def _result(
        resource: Any,
        code: ErrorCode,
        message: str,
        configs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        return {
            "error_code": code,
            "error_message": message,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": configs or [],
        }


def _topic_name_problem(name: str) -> str | None:
    """Why Kafka's DescribeConfigs refuses a topic name (common.internals.Topic), in its
    words; a long name is quoted cut (Kafka quotes it whole)."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME:
        return (
            f"the length of '{_shown(name)}' is longer than the max allowed length {MAX_TOPIC_NAME}"
        )
    if LEGAL_TOPIC_NAME.fullmatch(name) is None:
        return (
            f"'{name}' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return None


def _shown(name: str, limit: int = 255) -> str:
    """A client's resource name as an error message quotes it: cut, so that the message
    fits a STRING (32,767 bytes) whatever the name's length (a 32,767-character name
    made the error reply unencodable: a traceback and a closed connection)."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
