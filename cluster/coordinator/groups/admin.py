"""Group administration: ListGroups, DescribeGroups, DeleteGroups, and read-only
access to the live groups for tests and state dumps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode as E

from ...storage.state_log import Record
from . import store
from .core import NONE, GroupCoordinatorCore, StorageError
from .model import Group, GroupState


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups' view of one group."""

    error: int
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[tuple[str, str | None, str, str, bytes, bytes], ...] = ()
    """(member_id, instance_id, client_id, client_host, metadata, assignment)."""


class GroupAdmin(GroupCoordinatorCore):
    """Listing, describing and deleting groups."""

    # ------------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] = ()) -> tuple[int, list[tuple[str, str, str]]]:
        """ListGroups: (error, [(group_id, protocol_type, state)]) for loaded partitions."""
        wanted = {s.lower() for s in states}
        if self._partitions.any_loading:
            return int(E.coordinator_load_in_progress), []
        out = []
        for group_id, group in self._groups.items():
            if group.state == GroupState.DEAD:
                continue
            if wanted and group.state.value.lower() not in wanted:
                continue
            out.append((group_id, group.protocol_type or "", group.state.value))
        return NONE, out

    def describe_group(self, group_id: str) -> GroupSummary:
        err = self._coordinator_error(group_id)
        if err:
            return GroupSummary(err, group_id, "", "", "")
        group = self._groups.get(group_id)
        if group is None:
            return GroupSummary(NONE, group_id, GroupState.DEAD.value, "", "")
        stable = group.state == GroupState.STABLE
        members = []
        for m in group.members.values():
            metadata = assignment = b""
            if stable and group.protocol_name is not None:
                metadata = m.metadata_for(group.protocol_name)
                assignment = m.assignment or b""
            members.append(
                (m.member_id, m.instance_id, m.client_id, m.client_host, metadata, assignment)
            )
        return GroupSummary(
            NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            tuple(members),
        )

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group: only groups without members can be deleted."""
        err = self._coordinator_error(group_id)
        if err:
            return err
        group = self._groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return int(E.group_id_not_found)
        if group.members or group.state != GroupState.EMPTY:
            return int(E.non_empty_group)
        records = [Record(store.group_key(group_id), None)]
        go = self._offsets.get(group_id)
        if go is not None:
            for topic, partition in go.committed:
                records.append(Record(store.offset_key(group_id, topic, partition), None))
            for producer_id, pending in go.pending.items():
                for topic, partition in pending:
                    records.append(
                        Record(store.txn_offset_key(group_id, producer_id, topic, partition), None)
                    )
        try:
            self._persist(group_id, records)
        except StorageError:
            return int(E.coordinator_not_available)
        group.state = GroupState.DEAD
        del self._groups[group_id]
        self._offsets.pop(group_id, None)
        self._cancel_group_timers(group_id)
        return NONE

    def group(self, group_id: str) -> Group | None:
        """The live group object (read-only use: tests, state dumps)."""
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())
