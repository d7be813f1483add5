"""The controller's durable state: cluster id, topics with their assignments and
configs, the next producer-id block and the finalized feature levels. Small, so it
is one JSON document written atomically (temp file + rename) before any change is acknowledged."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..storage.checkpoint import write_atomic


@dataclass(slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    replicas: list[int]  # partition index -> the broker holding its single replica
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.replicas)


@dataclass(slots=True)
class ControllerState:
    cluster_id: str
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    next_producer_id: int = 0
    epoch: int = 0  # bumped on every change; brokers use it to notice news
    # finalized feature levels (KIP-584), e.g. {"transaction.version": 2}; None: not
    # yet bootstrapped (the controller then sets them from its settings)
    features: dict[str, int] | None = None

    @classmethod
    def new(cls) -> ControllerState:
        return cls(cluster_id=_new_cluster_id())

    def to_json(self) -> dict:
        return {
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "epoch": self.epoch,
            "features": self.features,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "replicas": t.replicas,
                    "configs": t.configs,
                }
                for t in self.topics.values()
            ],
        }

    @classmethod
    def from_json(cls, doc: dict) -> ControllerState:
        state = cls(
            cluster_id=doc["cluster_id"],
            next_producer_id=int(doc["next_producer_id"]),
            epoch=int(doc.get("epoch", 0)),
        )
        features = doc.get("features")
        if features is not None:
            state.features = {str(k): int(v) for k, v in features.items()}
        for t in doc["topics"]:
            state.topics[t["name"]] = TopicRecord(
                name=t["name"],
                topic_id=uuid.UUID(t["topic_id"]),
                replicas=[int(b) for b in t["replicas"]],
                configs=dict(t.get("configs", {})),
            )
        return state


def _new_cluster_id() -> str:
    # Kafka cluster ids are 22-character url-safe base64 UUIDs.
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ControllerStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "controller.json"

    def load(self) -> ControllerState:
        if not self.path.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            state = ControllerState.new()
            self.save(state)
            return state
        try:
            return ControllerState.from_json(json.loads(self.path.read_text()))
        except (ValueError, KeyError) as exc:
            raise RuntimeError(f"controller state {self.path} is unreadable: {exc}") from exc

    def save(self, state: ControllerState) -> None:
        data = json.dumps(state.to_json(), indent=1).encode()
        write_atomic(self.path, data)
