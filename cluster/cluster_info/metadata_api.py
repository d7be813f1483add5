"""Metadata v0-v12: brokers, controller, topics with stable topic ids and leaders.

An unknown topic triggers one refresh of the cluster view (a topic created a moment
ago on the controller is then visible) and, when the client allows it and
``auto.create.topics.enable`` is on, its creation.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..controller.controller import topic_name_error
from ..metadata import NO_LEADER, ClusterView, TopicMeta
from ..metadata_source import MetadataSource
from ..server.dispatch import ApiRegistry, RequestContext
from ..settings import NodeSettings

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12, 13))


def partition_entries(topic: TopicMeta) -> list[dict[str, Any]]:
    out = []
    for index, (leader, replica) in enumerate(zip(topic.leaders, topic.replicas, strict=True)):
        online = leader != NO_LEADER
        out.append(
            {
                "error_code": ErrorCode.none if online else ErrorCode.leader_not_available,
                "partition_index": index,
                "leader_id": leader,
                "leader_epoch": 0,
                "replica_nodes": [replica],
                "isr_nodes": [replica] if online else [],
                "offline_replicas": [] if online else [replica],
            }
        )
    return out


class MetadataApi:
    def __init__(
        self,
        source: MetadataSource,
        settings: NodeSettings,
        on_served: Callable[[str | None], None] | None = None,
    ) -> None:
        self.source = source
        self.settings = settings
        self.on_served = on_served  # the controller notes which node pulled which view

    def register(self, registry: ApiRegistry) -> None:
        registry.register(3, 0, 12, self.handle, owner="cluster_info")

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        view = self.source.view()
        requested = request.topics
        if ctx.api_version == 0 and not requested:
            requested = None  # v0: an empty list means all topics
        include_ops = getattr(request, "include_topic_authorized_operations", False)
        allow_create = getattr(request, "allow_auto_topic_creation", True) and self.settings.get(
            "auto.create.topics.enable"
        )
        if requested is None:
            topics = [self._topic_entry(t, include_ops) for t in view.topics.values()]
        else:
            view = await self._ensure_known(view, requested, allow_create)
            topics = [self._requested_entry(view, r, include_ops) for r in requested]
        if self.on_served is not None:
            self.on_served(ctx.client_id)
        return ctx.respond(
            throttle_time=0,
            brokers=[
                {"node_id": n.node_id, "host": n.host, "port": n.port, "rack": None}
                for n in sorted(view.nodes.values(), key=lambda n: n.node_id)
            ],
            cluster_id=view.cluster_id,
            controller_id=view.controller_id,
            topics=topics,
            cluster_authorized_operations=ALL_CLUSTER_OPERATIONS
            if getattr(request, "include_cluster_authorized_operations", False)
            else AUTHORIZED_OPERATIONS_OMITTED,
        )

    async def _ensure_known(
        self, view: ClusterView, requested: Any, allow_create: bool
    ) -> ClusterView:
        names = [r.name for r in requested if _name_of(r) and view.topic(r.name) is None]
        ids = [r.topic_id for r in requested if _id_of(r) and view.topic_by_id(r.topic_id) is None]
        if not names and not ids:
            return view
        view = await self.source.refresh()
        missing = [n for n in names if view.topic(n) is None and topic_name_error(n) is None]
        if missing and allow_create:
            await self.source.create_topics(missing)
            view = await self.source.refresh()
        return view

    def _topic_entry(self, topic: TopicMeta, include_ops: bool) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "name": topic.name,
            "topic_id": topic.topic_id,
            "is_internal": False,
            "partitions": partition_entries(topic),
            "topic_authorized_operations": ALL_TOPIC_OPERATIONS
            if include_ops
            else AUTHORIZED_OPERATIONS_OMITTED,
        }

    def _requested_entry(self, view: ClusterView, req: Any, include_ops: bool) -> dict[str, Any]:
        name = _name_of(req)
        if name is not None:
            topic = view.topic(name)
            if topic is None:
                code = (
                    ErrorCode.invalid_topic_exception
                    if topic_name_error(name)
                    else ErrorCode.unknown_topic_or_partition
                )
                return {
                    "error_code": code,
                    "name": name,
                    "topic_id": uuid.UUID(int=0),
                    "partitions": [],
                }
        elif not hasattr(req, "topic_id"):  # an empty name, in a version without ids
            return {
                "error_code": ErrorCode.invalid_topic_exception,
                "name": "",
                "topic_id": uuid.UUID(int=0),
                "partitions": [],
            }
        else:
            topic = view.topic_by_id(req.topic_id)
            if topic is None:
                return {
                    "error_code": ErrorCode.unknown_topic_id,
                    "name": None,
                    "topic_id": req.topic_id,
                    "partitions": [],
                }
        return self._topic_entry(topic, include_ops)


def _name_of(req: Any) -> str | None:
    name = getattr(req, "name", None)
    return name if name else None


def _id_of(req: Any) -> bool:
    topic_id = getattr(req, "topic_id", None)
    return topic_id is not None and topic_id.int != 0 and not _name_of(req)
