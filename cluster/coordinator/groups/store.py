"""How group state is written to (and read back from) a partition's state log.

Keys and values are compact JSON so the log can be inspected with ``jq`` after a
chaos run. Three kinds of keys, like Kafka's ``__consumer_offsets`` record types:

- ``["g", group]`` -> group metadata (generation, protocol, leader, members with
  their subscription for the selected protocol and, once synced, their assignment)
- ``["o", group, topic, partition]`` -> committed offset
- ``["t", group, producer_id, topic, partition]`` -> pending transactional offset
  (removed by a tombstone when the transaction completes)
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...storage.state_log import Record, StateLog
from .model import Group, GroupState, Member, OffsetValue

TopicPartition = tuple[str, int]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def group_key(group_id: str) -> bytes:
    return _dumps(["g", group_id])


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _dumps(["o", group_id, topic, partition])


def txn_offset_key(group_id: str, producer_id: int, topic: str, partition: int) -> bytes:
    return _dumps(["t", group_id, producer_id, topic, partition])


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


def group_record(group: Group) -> Record:
    """The group's metadata as persisted: enough to resume after a restart.

    A member is stored with its subscription for the selected protocol only (as in
    Kafka); ``synced`` says whether the generation's assignments were distributed.
    """
    members = []
    for m in group.members.values():
        metadata = b""
        if group.protocol_name is not None and group.protocol_name in m.protocol_names():
            metadata = m.metadata_for(group.protocol_name)
        members.append(
            {
                "id": m.member_id,
                "instance": m.instance_id,
                "client": m.client_id,
                "host": m.client_host,
                "session_ms": m.session_timeout_ms,
                "rebalance_ms": m.rebalance_timeout_ms,
                "metadata": _b64(metadata),
                "assignment": _b64(m.assignment),
            }
        )
    value = {
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "generation": group.generation,
        "leader": group.leader_id,
        "synced": group.state == GroupState.STABLE,
        "members": members,
    }
    return Record(group_key(group.group_id), _dumps(value))


def offset_record(group_id: str, topic: str, partition: int, value: OffsetValue) -> Record:
    return Record(
        offset_key(group_id, topic, partition),
        _dumps(
            {
                "offset": value.offset,
                "leader_epoch": value.leader_epoch,
                "metadata": value.metadata,
                "seq": value.seq,
            }
        ),
    )


def txn_offset_record(
    group_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int, v: OffsetValue
) -> Record:
    return Record(
        txn_offset_key(group_id, producer_id, topic, partition),
        _dumps(
            {
                "offset": v.offset,
                "leader_epoch": v.leader_epoch,
                "metadata": v.metadata,
                "seq": v.seq,
                "producer_epoch": producer_epoch,
            }
        ),
    )


@dataclass(slots=True)
class GroupOffsets:
    """Committed and pending-transactional offsets of one group."""

    committed: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    pending: dict[int, dict[TopicPartition, OffsetValue]] = field(default_factory=dict)
    """producer id -> offsets committed in its still-open transaction."""
    pending_epochs: dict[int, int] = field(default_factory=dict)

    def has_pending(self, tp: TopicPartition | None = None) -> bool:
        if tp is None:
            return any(self.pending.values())
        return any(tp in offsets for offsets in self.pending.values())

    def is_empty(self) -> bool:
        return not self.committed and not self.pending


@dataclass(slots=True)
class LoadedPartition:
    """What replaying one partition's log produced."""

    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets: dict[str, GroupOffsets] = field(default_factory=dict)
    max_seq: int = 0


def replay(log: StateLog) -> LoadedPartition:
    loaded = LoadedPartition()
    for raw_key, raw_value in log.load().items():
        key = json.loads(raw_key)
        value = json.loads(raw_value)
        kind = key[0]
        if kind == "g":
            loaded.groups[key[1]] = value
        elif kind == "o":
            _, group_id, topic, partition = key
            ov = OffsetValue(
                value["offset"], value["leader_epoch"], value["metadata"], value["seq"]
            )
            loaded.offsets.setdefault(group_id, GroupOffsets()).committed[(topic, partition)] = ov
            loaded.max_seq = max(loaded.max_seq, ov.seq)
        elif kind == "t":
            _, group_id, producer_id, topic, partition = key
            ov = OffsetValue(
                value["offset"], value["leader_epoch"], value["metadata"], value["seq"]
            )
            offsets = loaded.offsets.setdefault(group_id, GroupOffsets())
            offsets.pending.setdefault(producer_id, {})[(topic, partition)] = ov
            offsets.pending_epochs[producer_id] = value.get("producer_epoch", -1)
            loaded.max_seq = max(loaded.max_seq, ov.seq)
    return loaded


def restore_group(group_id: str, value: dict[str, Any]) -> Group:
    """Rebuild a group from its record; the caller decides the state and timers."""
    group = Group(
        group_id=group_id,
        protocol_type=value.get("protocol_type"),
        protocol_name=value.get("protocol"),
        generation=value.get("generation", 0),
    )
    protocol = group.protocol_name
    for m in value.get("members", []):
        metadata = _unb64(m.get("metadata")) or b""
        member = Member(
            member_id=m["id"],
            instance_id=m.get("instance"),
            client_id=m.get("client", ""),
            client_host=m.get("host", ""),
            session_timeout_ms=m["session_ms"],
            rebalance_timeout_ms=m["rebalance_ms"],
            protocol_type=group.protocol_type or "",
            protocols=[(protocol, metadata)] if protocol is not None else [],
            assignment=_unb64(m.get("assignment")),
        )
        group.add(member)
    leader = value.get("leader")
    if leader in group.members:
        group.leader_id = leader
    group.protocol_type = value.get("protocol_type")
    return group


def live_records(groups: Iterable[Group], offsets: dict[str, GroupOffsets]) -> list[Record]:
    """Everything a compacted log must contain to replay to the current state."""
    records = [group_record(g) for g in groups]
    for group_id, go in offsets.items():
        for (topic, partition), value in go.committed.items():
            records.append(offset_record(group_id, topic, partition, value))
        for producer_id, pending in go.pending.items():
            epoch = go.pending_epochs.get(producer_id, -1)
            for (topic, partition), value in pending.items():
                records.append(
                    txn_offset_record(group_id, producer_id, epoch, topic, partition, value)
                )
    return records


def open_log(data_dir: Path, partition: int, *, fsync: bool, compact_min_bytes: int) -> StateLog:
    return StateLog(
        Path(data_dir) / f"__consumer_offsets-{partition}.log",
        fsync=fsync,
        compact_min_bytes=compact_min_bytes,
    )
