"""Which coordinator node serves which group and transactional id.

Group ids and transactional ids hash onto the internal partitions of
``__consumer_offsets`` and ``__transaction_state`` (Kafka's abs(String.hashCode) % n);
internal partition ``p`` belongs to coordinator node ``coordinator_ids[p % M]``. The
list of coordinator ids is fixed by configuration (every node gets the same list),
so ownership never moves when a coordinator is down: its keys answer
COORDINATOR_NOT_AVAILABLE until it is back (one replica, like every partition here).
"""

from __future__ import annotations

from dataclasses import dataclass

from .groups.hashing import partition_for

GROUP_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class CoordinatorPlacement:
    coordinator_ids: tuple[int, ...]
    group_partitions: int = 50
    transaction_partitions: int = 50

    def __post_init__(self) -> None:
        if not self.coordinator_ids:
            raise ValueError("at least one coordinator node is needed")
        if len(set(self.coordinator_ids)) != len(self.coordinator_ids):
            raise ValueError(f"duplicate coordinator ids: {self.coordinator_ids}")
        object.__setattr__(self, "coordinator_ids", tuple(sorted(self.coordinator_ids)))

    def partitions_of(self, key_type: int) -> int:
        return self.group_partitions if key_type == KEY_TYPE_GROUP else self.transaction_partitions

    def partition_for(self, key_type: int, key: str) -> int:
        return partition_for(key, self.partitions_of(key_type))

    def owner_of_partition(self, partition: int) -> int:
        return self.coordinator_ids[partition % len(self.coordinator_ids)]

    def owner(self, key_type: int, key: str) -> int:
        return self.owner_of_partition(self.partition_for(key_type, key))

    def owned_partitions(self, node_id: int, key_type: int) -> list[int]:
        return [
            p for p in range(self.partitions_of(key_type)) if self.owner_of_partition(p) == node_id
        ]
