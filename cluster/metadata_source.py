"""Where a node gets its view of the cluster.

``LocalMetadataSource`` reads the controller in the same process. A node without
the controller uses ``RemoteMetadataSource``: it registers with the controller
(BrokerRegistration), heartbeats (BrokerHeartbeat), pulls the cluster view with
ordinary Metadata requests and the finalized features with ApiVersions v3 (as a
Kafka client learns them), and forwards CreateTopics (auto-creation),
DescribeConfigs, FindCoordinator, AllocateProducerIds and UpdateFeatures to the
controller. All of
it is Kafka protocol over TCP, so the harness can proxy and disturb the link.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from .controller.controller import NODE_CLIENT_PREFIX, Controller
from .metadata import NO_LEADER, ClusterView, NodeEndpoint, TopicMeta
from .net.client import STALL_PROBE_S, PeerConnection, PeerUnavailable
from .protocol.build import make
from .protocol.codec import request_class
from .settings import NodeSettings

log = logging.getLogger(__name__)


class MetadataSource(Protocol):
    def view(self) -> ClusterView: ...

    async def refresh(self) -> ClusterView: ...

    async def create_topics(self, names: list[str]) -> dict[str, int]: ...

    async def topic_configs(self, name: str) -> dict[str, str] | None: ...

    async def allocate_producer_ids(self) -> tuple[int, int]: ...

    async def forward(self, request: Any) -> Any | None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class LocalMetadataSource:
    def __init__(self, controller: Controller, settings: NodeSettings) -> None:
        self.controller = controller
        self.settings = settings

    def view(self) -> ClusterView:
        return self.controller.view()

    async def refresh(self) -> ClusterView:
        return self.controller.view()

    async def create_topics(self, names: list[str]) -> dict[str, int]:
        out = {}
        for name in names:
            code, _, _ = self.controller.create_topic(name, -1, -1, {})
            out[name] = code
        return out

    async def topic_configs(self, name: str) -> dict[str, str] | None:
        return self.controller.topic_configs(name)

    async def allocate_producer_ids(self) -> tuple[int, int]:
        return self.controller.allocate_producer_ids()

    async def forward(self, request: Any) -> Any | None:
        return None  # the controller is in this process: its handler answers

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def view_from_metadata(
    response: Any,
    epoch: int,
    features: dict[str, int] | None = None,
    features_epoch: int = -1,
) -> ClusterView:
    nodes = {b.node_id: NodeEndpoint(b.node_id, b.host, b.port) for b in response.brokers}
    topics = {}
    for t in response.topics:
        if t.error_code != 0 or t.name is None:
            continue
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        topics[t.name] = TopicMeta(
            name=t.name,
            topic_id=t.topic_id or uuid.UUID(int=0),
            leaders=tuple(p.leader_id for p in parts),
            replicas=tuple(p.replica_nodes[0] if p.replica_nodes else NO_LEADER for p in parts),
        )
    return ClusterView(
        cluster_id=response.cluster_id or "",
        controller_id=response.controller_id,
        epoch=epoch,
        nodes=nodes,
        topics=topics,
        features=dict(features or {}),
        features_epoch=features_epoch,
    )


class RemoteMetadataSource:
    """A node's link to a controller in another process."""

    def __init__(
        self,
        *,
        node_id: int,
        roles: frozenset[str],
        advertised_host: str,
        advertised_port: int,
        controller_host: str,
        controller_port: int,
        settings: NodeSettings,
    ) -> None:
        self.node_id = node_id
        self.roles = roles
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        self.settings = settings
        client_id = f"{NODE_CLIENT_PREFIX}{node_id}"
        # A lost Metadata response would hold the node's view (and every refresh queued
        # behind it) for the request timeout: the connection probes a stalled request.
        self.conn = PeerConnection(
            controller_host, controller_port, client_id=client_id, stall_probe_s=STALL_PROBE_S
        )
        # Heartbeats long-poll at the controller, so they get their own connection
        # (a connection answers its requests in order; a probe would wait behind the poll,
        # and the heartbeat's own short timeout bounds a lost answer).
        self.heartbeat_conn = PeerConnection(controller_host, controller_port, client_id=client_id)
        self._view = ClusterView(cluster_id="", controller_id=-1)
        self._epoch = 0
        self.broker_epoch = -1
        self._configs: dict[str, dict[str, str]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._registered = asyncio.Event()
        self._refresh_lock = asyncio.Lock()

    def view(self) -> ClusterView:
        return self._view

    async def refresh(self) -> ClusterView:
        async with self._refresh_lock:
            request = make(
                request_class(3, 12),
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            # Features first, then the view, pipelined on one connection: the controller
            # counts this node as caught up when it serves the Metadata request, so
            # nothing may follow it before the new view is installed.
            versions, response = await asyncio.gather(
                self.conn.request(
                    make(
                        request_class(18, 3),
                        client_software_name="txnchaos-node",
                        client_software_version="1",
                    )
                ),
                self.conn.request(request),
            )
            features = {
                f.name: int(f.max_version_level)
                for f in versions.finalized_features
                if f.max_version_level > 0
            }
            self._epoch += 1
            self._view = view_from_metadata(
                response, self._epoch, features, int(versions.finalized_features_epoch)
            )
            return self._view

    async def _register(self) -> None:
        view = await self.refresh()
        request = make(
            request_class(62, 0),
            broker_id=self.node_id,
            cluster_id=view.cluster_id,
            incarnation_id=uuid.uuid4(),
            listeners=[
                {
                    "name": "PLAINTEXT",
                    "host": self.advertised_host,
                    "port": self.advertised_port,
                    "security_protocol": 0,
                }
            ],
            features=[
                {
                    "name": f"txnchaos.role.{r}",
                    "min_supported_version": 1,
                    "max_supported_version": 1,
                }
                for r in sorted(self.roles)
            ],
            rack=None,
        )
        response = await self.conn.request(request)
        if response.error_code != 0:
            raise PeerUnavailable(f"registration refused: {ErrorCode(response.error_code).name}")
        self.broker_epoch = response.broker_epoch
        await self.refresh()
        self._registered.set()

    async def start(self) -> None:
        """Register with the controller; retries until it answers."""
        delay = 0.05
        while True:
            try:
                await self._register()
                break
            except (PeerUnavailable, OSError) as exc:
                log.info("controller not reachable yet (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        self._tasks.append(asyncio.create_task(self._heartbeat_loop()))
        self._tasks.append(asyncio.create_task(self._refresh_loop()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.conn.close()
        await self.heartbeat_conn.close()

    async def _heartbeat_loop(self) -> None:
        """Heartbeat continuously; the controller holds each heartbeat until the view
        changes (or an interval passes), and a not-caught-up answer triggers a pull."""
        interval = self.settings.get("broker.heartbeat.interval.ms") / 1000
        while True:
            try:
                response = await self.heartbeat_conn.request(
                    make(
                        request_class(63, 0),
                        broker_id=self.node_id,
                        broker_epoch=self.broker_epoch,
                        current_metadata_offset=self._epoch,
                        want_fence=False,
                        want_shut_down=False,
                    ),
                    timeout=max(interval * 4, 2.0),
                )
                if response.error_code == ErrorCode.stale_broker_epoch:
                    log.info("controller forgot us (restarted?); registering again")
                    await self._register()
                elif not response.is_caught_up:
                    await self.refresh()
            except (PeerUnavailable, OSError) as exc:
                log.info("heartbeat failed: %s", exc)
                await asyncio.sleep(interval)

    async def _refresh_loop(self) -> None:
        interval = self.settings.get("metadata.refresh.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh()
            except (PeerUnavailable, OSError) as exc:
                log.info("metadata refresh failed: %s", exc)

    async def create_topics(self, names: list[str]) -> dict[str, int]:
        request = make(
            request_class(19, 7),
            topics=[{"name": n, "num_partitions": -1, "replication_factor": -1} for n in names],
            timeout=30_000,
            validate_only=False,
        )
        response = await self.conn.request(request)
        await self.refresh()
        return {t.name: int(t.error_code) for t in response.topics}

    async def topic_configs(self, name: str) -> dict[str, str] | None:
        request = make(
            request_class(32, 4),
            resources=[{"resource_type": 2, "resource_name": name, "configuration_keys": None}],
            include_synonyms=False,
            include_documentation=False,
        )
        response = await self.conn.request(request)
        result = response.results[0]
        if result.error_code != 0:
            return None
        return {c.name: c.value for c in result.configs if c.config_source == 1 and c.value}

    async def forward(self, request: Any) -> Any | None:
        """Send a request meant for the controller (UpdateFeatures) and return its
        answer; the features it changed are pulled before returning."""
        response = await self.conn.request(request, timeout=60.0)
        await self.refresh()
        return response

    async def allocate_producer_ids(self) -> tuple[int, int]:
        request = make(request_class(67, 0), broker_id=self.node_id, broker_epoch=self.broker_epoch)
        response = await self.conn.request(request)
        if response.error_code != 0:
            raise PeerUnavailable(
                f"AllocateProducerIds failed: {ErrorCode(response.error_code).name}"
            )
        return response.producer_id_start, response.producer_id_len
