"""The rebalance state machine of a classic group: Empty -> PreparingRebalance ->
CompletingRebalance -> Stable, the join phase and its deadlines, and member expiry.

The request entry points that drive it (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
are in ``membership.py``; every deadline (session, pending member, join, sync) fires
here through ``tick()``.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode as E

from .core import NONE, GroupCoordinatorCore, StorageError
from .model import Group, GroupState, JoinResult, Member, SyncResult

log = logging.getLogger(__name__)


class Rebalancing(GroupCoordinatorCore):
    """Rebalances and the timers that start or finish them."""

    # ------------------------------------------------------------------ timers

    def tick(self) -> None:
        """Fire every deadline that has passed on ``clock``."""
        for key in self._deadlines.pop_expired(self.clock()):
            try:
                self._fire(key)
            except Exception:
                log.exception("group timer %r failed", key)

    def _fire(self, key: Any) -> None:
        kind, group_id = key[0], key[1]
        group = self._groups.get(group_id)
        if group is None:
            return
        if kind == "hb":
            self._on_session_expiry(group, key[2])
        elif kind == "pending":
            self._on_pending_member_expiry(group, key[2])
        elif kind == "join":
            self._on_join_deadline(group)
        elif kind == "sync":
            self._on_sync_deadline(group)

    def _on_session_expiry(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting_join or member.awaiting_sync:
            # A member parked in a JoinGroup/SyncGroup long poll is alive by definition;
            # the rebalance and pending-sync timeouts bound how long it can stay parked.
            self._schedule_heartbeat(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member_id)
        self._remove_members_and_update(group, [member_id], "session timeout")

    def _on_pending_member_expiry(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    def _on_join_deadline(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if group.initial_delay_active:
            if group.new_member_added and group.initial_delay_remaining_ms > 0:
                delay = min(
                    self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms
                )
                group.initial_delay_remaining_ms -= delay
                group.new_member_added = False
                self._deadlines.schedule(("join", group.group_id), self._after_ms(delay))
                return
            group.initial_delay_active = False
        self._complete_join(group)

    def _on_sync_deadline(self, group: Group) -> None:
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        log.info("group %s: members %s did not sync in time", group.group_id, late)
        for member_id in late:
            member = group.remove(member_id)
            if member is not None:
                self._forget_member(group, member, int(E.unknown_member_id))
        self._prepare_rebalance(group, "pending sync timeout")

    # ------------------------------------------------------------------ rebalance core

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        log.info("group %s: preparing rebalance (%s)", group.group_id, reason)
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = None
                self._resolve(member.sync_future, SyncResult(int(E.rebalance_in_progress)))
                member.sync_future = None
        group.pending_sync.clear()
        self._deadlines.cancel(("sync", group.group_id))
        was_empty = group.state == GroupState.EMPTY
        group.state = GroupState.PREPARING_REBALANCE
        timeout_ms = group.rebalance_timeout_ms()
        delay_ms = self.config.initial_rebalance_delay_ms
        if was_empty and delay_ms > 0:
            delay = min(delay_ms, timeout_ms)
            group.initial_delay_active = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(timeout_ms - delay, 0)
            self._deadlines.schedule(("join", group.group_id), self._after_ms(delay))
        else:
            group.initial_delay_active = False
            self._deadlines.schedule(("join", group.group_id), self._after_ms(timeout_ms))
            self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.state == GroupState.PREPARING_REBALANCE
            and not group.initial_delay_active
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        gid = group.group_id
        self._deadlines.cancel(("join", gid))
        group.initial_delay_active = False
        # Dynamic members that did not rejoin in time are out; static ones keep their
        # place (they may come back with the same group.instance.id).
        for member in list(group.members.values()):
            if not member.awaiting_join and member.instance_id is None:
                group.remove(member.member_id)
                self._forget_member(group, member, int(E.unknown_member_id))
        if not group.members:
            group.generation += 1
            group.protocol_name = None
            group.leader_id = None
            group.state = GroupState.EMPTY
            self._persist_quietly(group)
            log.info("group %s: empty at generation %d", gid, group.generation)
            return
        joined = [m for m in group.members.values() if m.awaiting_join]
        if not joined:
            # Only static members that have not rejoined yet: wait another round
            # (their session timeouts will remove them if they never come back).
            self._deadlines.schedule(("join", gid), self._after_ms(group.rebalance_timeout_ms()))
            return
        if group.leader_id is None or not group.members[group.leader_id].awaiting_join:
            group.leader_id = joined[0].member_id
        group.generation += 1
        group.protocol_name = group.select_protocol()
        group.state = GroupState.COMPLETING_REBALANCE
        self.rebalances_completed += 1
        self._persist_quietly(group)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            gid,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            if member.join_future is not None:
                self._resolve(member.join_future, self._join_result(group, member))
                member.join_future = None
            member.is_new = False
            self._schedule_heartbeat(group, member)
        group.pending_sync = set(group.members)
        self._deadlines.schedule(("sync", gid), self._after_ms(group.rebalance_timeout_ms()))

    def _persist_quietly(self, group: Group) -> None:
        """Persist a generation change; a failure is logged (the generation still stands
        in memory; the next successful write carries it)."""
        try:
            self._persist_group(group)
        except StorageError:
            log.exception("group %s: could not persist generation", group.group_id)

    def _join_result(
        self, group: Group, member: Member, *, skip_assignment: bool = False
    ) -> JoinResult:
        assert group.protocol_name is not None
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if group.is_leader(member.member_id):
            members = tuple(
                (m.member_id, m.instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            error=NONE,
            member_id=member.member_id,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=members,
            skip_assignment=skip_assignment,
        )

    def _remove_members_and_update(self, group: Group, member_ids: list[str], reason: str) -> None:
        removed = False
        for member_id in member_ids:
            member = group.remove(member_id)
            if member is not None:
                self._forget_member(group, member, int(E.unknown_member_id))
                removed = True
        if not removed:
            return
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
