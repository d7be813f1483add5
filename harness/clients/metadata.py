"""What the producer knows about the cluster: nodes, partition leaders, coordinators, features.

Metadata is fetched for the topics the producer writes, on first use, after a leader error
and every ``max_age_s``; the same refresh re-reads ApiVersions from the answering node, so a
``transaction.version`` finalized while the producer runs is seen (KIP-890: the client picks
the protocol at the start of each transaction from the latest features it saw).
Coordinators (transaction: key type 1, group: key type 0) come from FindCoordinator and are
cached until a request says NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ...cluster.security.sasl import SaslCredentials
from .connection import (
    API_FIND_COORDINATOR,
    API_METADATA,
    ConnectionLost,
    Features,
    NodeConnection,
    parse_bootstrap,
)
from .errors import FIND_COORDINATOR, Action, RetriableError, action, exception_for

KEY_GROUP = 0
KEY_TRANSACTION = 1


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


class ClusterView:
    """Connections by node id, partition leaders and coordinators of one cluster."""

    def __init__(
        self,
        bootstrap: str,
        client_id: str,
        *,
        request_timeout_s: float = 30.0,
        max_age_s: float = 30.0,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.sasl = sasl
        self.request_timeout_s = request_timeout_s
        self.max_age_s = max_age_s
        self.nodes: dict[int, Node] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, int] = {}
        self.features = Features()
        self._conns: dict[int, NodeConnection] = {}
        self._bootstrap_conns: list[NodeConnection] = []
        self._coordinators: dict[tuple[int, str], int] = {}
        self._topics: set[str] = set()
        self._refreshed_at = 0.0
        self._refresh_lock = asyncio.Lock()

    # -- connections --------------------------------------------------------------------------

    def connection(self, node_id: int) -> NodeConnection:
        conn = self._conns.get(node_id)
        if conn is None:
            node = self.nodes.get(node_id)
            if node is None:
                raise RetriableError(f"node {node_id} is not in the metadata")
            conn = NodeConnection(node_id, node.host, node.port, self.client_id, self.sasl)
            self._conns[node_id] = conn
        return conn

    async def any_connection(self) -> NodeConnection:
        """A negotiated connection to some node (a known one first, else a bootstrap one)."""
        candidates = [self.connection(n) for n in sorted(self.nodes)]
        if not candidates:
            if not self._bootstrap_conns:
                self._bootstrap_conns = [
                    NodeConnection(-1 - i, host, port, self.client_id, self.sasl)
                    for i, (host, port) in enumerate(self.bootstrap)
                ]
            candidates = list(self._bootstrap_conns)
        last: Exception | None = None
        for conn in candidates:
            try:
                await conn.negotiate(self.request_timeout_s)
                return conn
            except ConnectionLost as exc:
                last = exc
        raise ConnectionLost(f"no node reachable ({last})")

    # -- metadata -----------------------------------------------------------------------------

    def add_topics(self, topics: set[str] | list[str]) -> bool:
        """Track these topics; True if any was new (a refresh is needed)."""
        new = set(topics) - self._topics
        self._topics |= new
        return bool(new)

    def stale(self) -> bool:
        return time.monotonic() - self._refreshed_at > self.max_age_s

    async def refresh(self) -> None:
        """Metadata for the tracked topics, and the answering node's features."""
        async with self._refresh_lock:
            conn = await self.any_connection()
            await conn.negotiate(self.request_timeout_s, again=True)
            self.features = conn.features
            body = {
                "topics": [{"name": t, "topic_id": None} for t in sorted(self._topics)],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            }
            response = await conn.send(API_METADATA, body, self.request_timeout_s)
            nodes = {
                int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in response.brokers
            }
            for node_id, conn_ in list(self._conns.items()):
                node = nodes.get(node_id)
                if node is None or (node.host, node.port) != (conn_.host, conn_.port):
                    await conn_.close()
                    del self._conns[node_id]
            self.nodes = nodes
            for topic in response.topics:
                if topic.error_code != 0 or topic.name is None:
                    continue
                self.partition_counts[topic.name] = len(topic.partitions)
                for p in topic.partitions:
                    key = (topic.name, int(p.partition_index))
                    if p.error_code == 0 and int(p.leader_id) >= 0:
                        self.leaders[key] = int(p.leader_id)
                    else:
                        self.leaders.pop(key, None)
            self._refreshed_at = time.monotonic()

    async def leader(self, topic: str, partition: int) -> NodeConnection:
        """The connection to the partition's leader (refreshing once if it is unknown)."""
        if self.add_topics([topic]) or self.stale() or (topic, partition) not in self.leaders:
            await self.refresh()
        node_id = self.leaders.get((topic, partition))
        if node_id is None:
            raise RetriableError(f"no leader known for {topic}/{partition}")
        return self.connection(node_id)

    def forget_leader(self, topic: str, partition: int) -> None:
        self.leaders.pop((topic, partition), None)

    # -- coordinators -------------------------------------------------------------------------

    async def coordinator(self, key_type: int, key: str) -> NodeConnection:
        cached = self._coordinators.get((key_type, key))
        if cached is not None and cached in self.nodes:
            return self.connection(cached)
        conn = await self.any_connection()
        version = conn.version(API_FIND_COORDINATOR)
        if version >= 4:
            body = {"key_type": key_type, "coordinator_keys": [key]}
        else:
            body = {"key_type": key_type, "key": key}
        response = await conn.send(API_FIND_COORDINATOR, body, self.request_timeout_s)
        found = response.coordinators[0] if version >= 4 else response
        code = int(found.error_code)
        act = action(FIND_COORDINATOR, code)
        if act is not Action.OK:
            raise exception_for(act, f"FindCoordinator({key_type}, {key!r})", code)
        node = Node(int(found.node_id), found.host, int(found.port))
        if self.nodes.get(node.node_id) != node:
            self.nodes[node.node_id] = node
            old = self._conns.pop(node.node_id, None)
            if old is not None:
                await old.close()
        self._coordinators[(key_type, key)] = node.node_id
        return self.connection(node.node_id)

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    async def close(self) -> None:
        for conn in [*self._conns.values(), *self._bootstrap_conns]:
            await conn.close()
        self._conns.clear()
        self._bootstrap_conns.clear()
