"""In-memory model of classic consumer groups: members, groups, committed offsets.

These are plain data holders with small helpers; every state transition lives in
the coordinator's modules (``rebalance.py``, ``membership.py``, ``offsets.py``).
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field


class GroupState(enum.Enum):
    """The classic group states, valued with the names Kafka reports (DescribeGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup request is answered with (version-independent)."""

    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    """(member_id, group_instance_id, metadata) of every member; only the leader gets it."""
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes | None = None
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    """Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of the current generation that have not sent SyncGroup yet."""
    initial_delay_active: bool = False
    new_member_added: bool = False
    initial_delay_remaining_ms: int = 0

    # -- queries -------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self, extra: list[str] | None = None) -> set[str]:
        """Protocol names every member (and ``extra``, a joining member's list) supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        if extra is not None:
            sets.append(set(extra))
        if not sets:
            return set()
        return set.intersection(*sets)

    def supports(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's supportsProtocols)."""
        if not self.members:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and bool(
            self.candidate_protocols(protocol_names)
        )

    def select_protocol(self) -> str:
        """The protocol with most votes among those all members support.

        Ties go to the protocol the earliest-joined member prefers, so the choice is
        deterministic.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol supported by all members")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(first.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    # -- membership ----------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str | None
    seq: int
    """Position in the partition's write order: a transactional commit that completes
    later must not overwrite a plain commit written after it (Kafka compares log offsets)."""
