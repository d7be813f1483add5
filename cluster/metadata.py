"""The cluster as a broker sees it: nodes, topics, partition leaders.

The controller builds this view from its state; a broker on another node rebuilds
it from a Metadata response it pulls from the controller. Handlers only read it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    leaders: tuple[int, ...]  # per partition: the leader's node id, NO_LEADER when offline
    replicas: tuple[int, ...]  # per partition: the node that holds it (one replica)

    @property
    def num_partitions(self) -> int:
        return len(self.leaders)


@dataclass(slots=True)
class ClusterView:
    cluster_id: str
    controller_id: int
    epoch: int = 0
    nodes: dict[int, NodeEndpoint] = field(default_factory=dict)
    topics: dict[str, TopicMeta] = field(default_factory=dict)
    # finalized feature levels (level 0 features absent) and their epoch (-1: unknown)
    features: dict[str, int] = field(default_factory=dict)
    features_epoch: int = -1
    _by_id: dict[uuid.UUID, TopicMeta] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_id = {t.topic_id: t for t in self.topics.values()}

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def partitions_on(self, node_id: int) -> list[tuple[TopicMeta, int]]:
        return [
            (t, p) for t in self.topics.values() for p, r in enumerate(t.replicas) if r == node_id
        ]
