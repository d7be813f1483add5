"""The member lifecycle requests of a classic group: JoinGroup, SyncGroup, Heartbeat
and LeaveGroup.

JoinGroup and SyncGroup are long polls: the request's coroutine awaits a future that a
later request (or a timer in ``rebalance.py``) completes; other connections keep being
served meanwhile. Nothing awaits in the middle of a transition.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as E

from .core import NONE, StorageError
from .model import Group, GroupState, JoinResult, Member, SyncResult
from .rebalance import Rebalancing

log = logging.getLogger(__name__)

MEMBER_ID_PREFIX = 255
"""Characters of the client id kept in a member id (a 32,767-byte client id would make
member ids that no response can encode)."""


def _member(member_id: str, instance_id: str | None, spec: tuple[Any, ...], **extra: Any) -> Member:
    """A member from a JoinGroup's ``spec`` (client id and host, session and rebalance
    timeouts, protocol type, protocols)."""
    client_id, client_host, session_ms, rebalance_ms, protocol_type, protocols = spec
    return Member(
        member_id=member_id,
        instance_id=instance_id,
        client_id=client_id,
        client_host=client_host,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=list(protocols),
        **extra,
    )


class Membership(Rebalancing):
    """Members joining, syncing, heartbeating and leaving."""

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        group_instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        require_known_member_id: bool = True,
        supports_skip_assignment: bool = False,
    ) -> JoinResult:
        """JoinGroup: returns at once (errors, MEMBER_ID_REQUIRED) or when the join phase
        of the rebalance completes."""
        outcome = self._join(
            group_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocols,
            session_timeout_ms,
            rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms,
            client_id,
            client_host,
            require_known_member_id,
            supports_skip_assignment,
        )
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _join(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_ms: int,
        rebalance_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        supports_skip: bool,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        def fail(error: Any) -> JoinResult:
            return JoinResult(int(error), member_id)

        err = self._coordinator_error(group_id)
        if err:
            return fail(err)
        if not group_id:
            return fail(E.invalid_group_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_ms <= cfg.max_session_timeout_ms:
            return fail(E.invalid_session_timeout)
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return fail(E.unknown_member_id)
            group = self._groups[group_id] = Group(group_id)
        if group.state == GroupState.DEAD:
            return fail(E.coordinator_not_available)
        if not group.supports(protocol_type, [name for name, _ in protocols]):
            return fail(E.inconsistent_group_protocol)
        known = member_id in group.members or member_id in group.pending_members
        if (
            not known
            and group.state != GroupState.EMPTY
            and len(group.members) + len(group.pending_members) >= cfg.max_group_size
        ):
            return fail(E.group_max_size_reached)

        spec = (client_id, client_host, session_ms, rebalance_ms, protocol_type, protocols)
        if not member_id:
            # Kafka's shape, with the client id cut so the id always fits a string field.
            new_id = f"{client_id[:MEMBER_ID_PREFIX] or 'member'}-{uuid.uuid4()}"
            if instance_id is not None:
                old_id = group.static_members.get(instance_id)
                if old_id is not None:
                    return self._replace_static_member(
                        group, old_id, new_id, instance_id, spec, supports_skip
                    )
                return self._add_member(group, new_id, instance_id, spec)
            if require_known_member_id:
                group.pending_members.add(new_id)
                self._deadlines.schedule(("pending", group_id, new_id), self._after_ms(session_ms))
                return JoinResult(int(E.member_id_required), new_id)
            return self._add_member(group, new_id, None, spec)

        if member_id in group.pending_members:
            return self._add_member(group, member_id, instance_id, spec)
        if instance_id is not None:
            static_id = group.static_members.get(instance_id)
            if static_id is None:
                return fail(E.unknown_member_id)
            if static_id != member_id:
                return fail(E.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return fail(E.unknown_member_id)
        state = group.state
        if state == GroupState.PREPARING_REBALANCE:
            fut = self._update_member(group, member, spec)
            self._try_complete_join(group)
            return fut
        if state == GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member lost the join response (e.g. a retried request): answer
                # with the current generation again.
                self._schedule_heartbeat(group, member)
                return self._join_result(group, member)
            fut = self._update_member(group, member, spec)
            self._prepare_rebalance(group, f"member {member_id} changed its protocols")
            return fut
        if state == GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                fut = self._update_member(group, member, spec)
                self._prepare_rebalance(group, f"member {member_id} rejoined")
                return fut
            self._schedule_heartbeat(group, member)
            return self._join_result(group, member)
        return fail(E.unknown_member_id)

    def _add_member(
        self, group: Group, member_id: str, instance_id: str | None, spec: tuple[Any, ...]
    ) -> asyncio.Future[JoinResult]:
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member = _member(member_id, instance_id, spec, join_future=fut, is_new=True)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._deadlines.cancel(("pending", group.group_id, member_id))
        group.add(member)
        if group.state == GroupState.PREPARING_REBALANCE and group.initial_delay_active:
            group.new_member_added = True
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")
        return fut

    def _update_member(
        self, group: Group, member: Member, spec: tuple[Any, ...]
    ) -> asyncio.Future[JoinResult]:
        client_id, client_host, session_ms, rebalance_ms, _protocol_type, protocols = spec
        # A second JoinGroup while one is parked: the old request is superseded.
        self._resolve(
            member.join_future, JoinResult(int(E.rebalance_in_progress), member.member_id)
        )
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        member.protocols = list(protocols)
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        member.client_id = client_id
        member.client_host = client_host
        self._schedule_heartbeat(group, member)
        return fut

    def _replace_static_member(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        instance_id: str,
        spec: tuple[Any, ...],
        supports_skip: bool,
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """A static member came back with an unknown member id: it takes over the old
        member's place (and assignment); the old id is fenced."""
        old = group.members[old_id]
        self._fail_member_futures(old, int(E.fenced_instance_id))
        self._deadlines.cancel(("hb", group.group_id, old_id))
        new = _member(new_id, instance_id, spec, assignment=old.assignment)
        group.members = {
            (new_id if k == old_id else k): (new if k == old_id else v)
            for k, v in group.members.items()
        }
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        self._schedule_heartbeat(group, new)
        is_leader = group.is_leader(new_id)
        if (
            group.state == GroupState.STABLE
            and old.matches(new.protocols)
            and (supports_skip or not is_leader)
        ):
            try:
                self._persist_group(group)
            except StorageError:
                return JoinResult(int(E.coordinator_not_available), "")
            return self._join_result(group, new, skip_assignment=is_leader)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        new.join_future = fut
        if group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined")
        return fut

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: dict[str, bytes] | None = None,
    ) -> SyncResult:
        """SyncGroup: the leader's call distributes ``assignments``; every member's call
        returns its own assignment once the leader's has arrived."""
        outcome = self._sync(
            group_id,
            generation,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments or {},
        )
        if isinstance(outcome, SyncResult):
            return outcome
        return await outcome

    def _sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[SyncResult]:
        err = self._coordinator_error(group_id)
        if err:
            return SyncResult(err)
        group = self._groups.get(group_id)
        if group is None:
            return SyncResult(int(E.unknown_member_id))
        if group.state == GroupState.DEAD:
            return SyncResult(int(E.coordinator_not_available))
        err = self._validate_member(group, member_id, instance_id)
        if err:
            return SyncResult(err)
        if generation != group.generation:
            return SyncResult(int(E.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(int(E.inconsistent_group_protocol))
        member = group.members[member_id]
        if group.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(int(E.rebalance_in_progress))
        if group.state == GroupState.STABLE:
            group.pending_sync.discard(member_id)
            self._schedule_heartbeat(group, member)
            return self._sync_result(group, member)
        if group.state != GroupState.COMPLETING_REBALANCE:
            return SyncResult(int(E.unknown_member_id))

        self._resolve(member.sync_future, SyncResult(int(E.rebalance_in_progress)))
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        group.pending_sync.discard(member_id)
        if group.is_leader(member_id):
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.state = GroupState.STABLE
            try:
                self._persist_group(group)
            except StorageError:
                log.exception("group %s: could not persist assignment", group_id)
                group.state = GroupState.COMPLETING_REBALANCE
                for m in group.members.values():
                    m.assignment = None
                    self._resolve(m.sync_future, SyncResult(int(E.coordinator_not_available)))
                    m.sync_future = None
                self._prepare_rebalance(group, "failed to persist assignment")
                return fut
            for m in group.members.values():
                if m.sync_future is not None:
                    self._resolve(m.sync_future, self._sync_result(group, m))
                    m.sync_future = None
                    self._schedule_heartbeat(group, m)
            if not group.pending_sync:
                self._deadlines.cancel(("sync", group_id))
        return fut

    @staticmethod
    def _sync_result(group: Group, member: Member) -> SyncResult:
        return SyncResult(
            NONE,
            member.assignment or b"",
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
        )

    # ------------------------------------------------------------------ Heartbeat / Leave

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, group_instance_id: str | None = None
    ) -> int:
        err = self._coordinator_error(group_id)
        if err:
            return err
        group = self._groups.get(group_id)
        if group is None:
            return int(E.unknown_member_id)
        if group.state == GroupState.DEAD:
            return int(E.coordinator_not_available)
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return err
        if generation != group.generation:
            return int(E.illegal_generation)
        if group.state == GroupState.EMPTY:
            return int(E.unknown_member_id)
        self._schedule_heartbeat(group, group.members[member_id])
        if group.state == GroupState.PREPARING_REBALANCE:
            return int(E.rebalance_in_progress)
        return NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """LeaveGroup for (member_id, group_instance_id) pairs: (top error, per-member errors)."""
        err = self._coordinator_error(group_id)
        if err:
            return err, [err] * len(members)
        group = self._groups.get(group_id)
        if group is None:
            return NONE, [int(E.unknown_member_id)] * len(members)
        if group.state == GroupState.DEAD:
            err = int(E.coordinator_not_available)
            return err, [err] * len(members)
        errors: list[int] = []
        to_remove: list[str] = []
        pending_removed = False
        for member_id, instance_id in members:
            if instance_id is not None:
                static_id = group.static_members.get(instance_id)
                if static_id is None:
                    errors.append(int(E.unknown_member_id))
                elif member_id and member_id != static_id:
                    errors.append(int(E.fenced_instance_id))
                else:
                    errors.append(NONE)
                    to_remove.append(static_id)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._deadlines.cancel(("pending", group_id, member_id))
                pending_removed = True
                errors.append(NONE)
            elif member_id in group.members:
                errors.append(NONE)
                to_remove.append(member_id)
            else:
                errors.append(int(E.unknown_member_id))
        if to_remove:
            self._remove_members_and_update(group, to_remove, "members left")
        elif pending_removed:
            self._try_complete_join(group)
        return NONE, errors
