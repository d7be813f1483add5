"""The classic (pre-KIP-848) consumer-group coordinator: rebalance state machine and offsets.

Behaviour follows Apache Kafka's classic group coordinator (GroupMetadataManager /
ClassicGroup): the states Empty -> PreparingRebalance -> CompletingRebalance ->
Stable (and Dead), member ids handed out with MEMBER_ID_REQUIRED (JoinGroup v4+),
protocol selection by vote, a leader that computes the assignment and distributes it
through SyncGroup, session timeouts, rebalance timeouts, the "pending sync" timeout,
static membership (group.instance.id) and the initial rebalance delay.

Everything here runs on the event loop thread and never awaits in the middle of a
transition, so no locks are needed. JoinGroup and SyncGroup are long polls: the
request's coroutine awaits a future that a later request (or a timer) completes;
other connections keep being served meanwhile.

Timers do not sleep per member: deadlines live in one ``Deadlines`` queue checked by
``tick()`` against the injected clock (by a background task every
``GroupConfig.timer_tick_ms``, or by the caller when that is 0).

Durability: every change a client is told about (committed offsets, a new
generation, a distributed assignment) is appended to the owning partition's state log
before the answer is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from ...storage.state_log import Record, StateLog
from . import store
from .config import GroupConfig
from .hashing import partition_for
from .model import Group, GroupState, JoinResult, Member, OffsetValue, SyncResult
from .offset_commit_shape import OffsetEntry
from .store import GroupOffsets, TopicPartition
from .timers import Deadlines

log = logging.getLogger(__name__)

MEMBER_ID_PREFIX = 255
"""Characters of the client id kept in a member id (a 32,767-byte client id would make
member ids that no response can encode)."""

NONE = int(E.none)


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


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: int = NONE


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


class StorageError(Exception):
    """Appending to a partition's state log failed."""


class GroupCoordinator:
    """Classic consumer groups and their committed offsets, over ``num_partitions``
    internal partitions (Kafka's ``__consumer_offsets``) persisted under ``data_dir``.

    ``topic_partition_count(topic)`` answers how many partitions a topic has (None if
    the topic does not exist); OffsetCommit uses it to refuse unknown partitions.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        num_partitions: int = 50,
        topic_partition_count: Callable[[str], int | None],
        clock: Callable[[], float] = time.monotonic,
        config: GroupConfig | None = None,
    ) -> None:
        if num_partitions <= 0:
            raise ValueError("num_partitions must be positive")
        self.data_dir = Path(data_dir)
        self.num_partitions = num_partitions
        self.topic_partition_count = topic_partition_count
        self.clock = clock
        self.config = config or GroupConfig()
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, GroupOffsets] = {}
        self._logs: dict[int, StateLog] = {}
        self._loaded: set[int] = set()
        self._loading: set[int] = set()
        self._deadlines = Deadlines()
        self._seq = 0
        self._ticker: asyncio.Task[None] | None = None
        self.rebalances_completed = 0
        """How many join phases produced a new generation (for tests and metrics)."""

    # ------------------------------------------------------------------ partitions / life

    def partition_for(self, group_id: str) -> int:
        """The internal partition of a group: Kafka's abs(hashCode) % num_partitions."""
        return partition_for(group_id, self.num_partitions)

    def owns(self, group_id: str) -> bool:
        """Whether this coordinator currently serves the group (its partition is loaded)."""
        return self.partition_for(group_id) in self._loaded

    @property
    def loaded_partitions(self) -> frozenset[int]:
        return frozenset(self._loaded)

    def _coordinator_error(self, group_id: str) -> int:
        p = self.partition_for(group_id)
        if p in self._loading:
            return int(E.coordinator_load_in_progress)
        if p not in self._loaded:
            return int(E.not_coordinator)
        return NONE

    def load_partition(self, partition: int) -> None:
        """Become coordinator for one internal partition: replay its log into memory.

        Groups whose last record has a distributed assignment come back Stable with
        their members (whose session timers restart now), so a coordinator restart does
        not force a rebalance; a group persisted mid-rebalance restarts its rebalance.
        """
        if partition in self._loaded:
            return
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition {partition} out of range")
        self._loading.add(partition)
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            slog = store.open_log(
                self.data_dir,
                partition,
                fsync=self.config.fsync,
                compact_min_bytes=self.config.compact_min_bytes,
            )
            loaded = store.replay(slog)
            self._logs[partition] = slog
            self._seq = max(self._seq, loaded.max_seq)
            for group_id, value in loaded.groups.items():
                group = store.restore_group(group_id, value)
                self._groups[group_id] = group
                if not group.members:
                    group.state = GroupState.EMPTY
                    continue
                for member in group.members.values():
                    self._schedule_heartbeat(group, member)
                if value.get("synced") and all(
                    m.assignment is not None for m in group.members.values()
                ):
                    group.state = GroupState.STABLE
                else:
                    group.state = GroupState.COMPLETING_REBALANCE
                    for member in group.members.values():
                        member.assignment = None
                    self._prepare_rebalance(group, "restored mid-rebalance")
            for group_id, offsets in loaded.offsets.items():
                self._offsets[group_id] = offsets
                self._groups.setdefault(group_id, Group(group_id))
        finally:
            self._loading.discard(partition)
        self._loaded.add(partition)
        log.info("loaded group partition %d", partition)

    def unload_partition(self, partition: int) -> None:
        """Stop serving a partition: pending JoinGroup/SyncGroup calls get NOT_COORDINATOR."""
        if partition not in self._loaded:
            return
        self._loaded.discard(partition)
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            for member in group.members.values():
                self._fail_member_futures(member, int(E.not_coordinator))
            self._cancel_group_timers(group_id)
            self._offsets.pop(group_id, None)
        slog = self._logs.pop(partition, None)
        if slog is not None:
            slog.close()

    async def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load state (all partitions unless told otherwise) and start the timer task."""
        for p in range(self.num_partitions) if partitions is None else partitions:
            self.load_partition(p)
        if self.config.timer_tick_ms > 0 and self._ticker is None:
            self._ticker = asyncio.create_task(self._run_timers(), name="group-coordinator-timers")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        for p in sorted(self._loaded):
            self.unload_partition(p)

    async def _run_timers(self) -> None:
        interval = self.config.timer_tick_ms / 1000
        while True:
            self.tick()
            await asyncio.sleep(interval)

    def register(self, registry: Any) -> None:
        """Register the group APIs on an ``ApiRegistry``."""
        from .handlers import register_group_apis

        register_group_apis(self, registry)

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

    def _after_ms(self, ms: int) -> float:
        return self.clock() + ms / 1000

    def _schedule_heartbeat(self, group: Group, member: Member) -> None:
        self._deadlines.schedule(
            ("hb", group.group_id, member.member_id), self._after_ms(member.session_timeout_ms)
        )

    def _cancel_group_timers(self, group_id: str) -> None:
        for key in self._deadlines.snapshot():
            if isinstance(key, tuple) and key[1] == group_id:
                self._deadlines.cancel(key)

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

    # ------------------------------------------------------------------ persistence

    def _log_for(self, group_id: str) -> StateLog:
        return self._logs[self.partition_for(group_id)]

    def _persist(self, group_id: str, records: list[Record]) -> None:
        if not records:
            return
        slog = self._log_for(group_id)
        try:
            slog.append_batch(records)
        except OSError as exc:
            raise StorageError(str(exc)) from exc
        if slog.needs_compaction():
            p = self.partition_for(group_id)
            groups = [g for gid, g in self._groups.items() if self.partition_for(gid) == p]
            offsets = {gid: o for gid, o in self._offsets.items() if self.partition_for(gid) == p}
            try:
                slog.compact(store.live_records(groups, offsets))
            except OSError:
                log.exception("compaction of group partition %d failed", p)

    def _persist_group(self, group: Group) -> None:
        self._persist(group.group_id, [store.group_record(group)])

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # ------------------------------------------------------------------ futures

    @staticmethod
    def _resolve(fut: asyncio.Future[Any] | None, value: Any) -> None:
        if fut is not None and not fut.done():
            fut.set_result(value)

    def _fail_member_futures(self, member: Member, error: int) -> None:
        self._resolve(member.join_future, JoinResult(error, member.member_id))
        self._resolve(member.sync_future, SyncResult(error))
        member.join_future = None
        member.sync_future = None

    def _forget_member(self, group: Group, member: Member, error: int) -> None:
        """Clean up after ``group.remove``: answer its parked requests, drop its timer."""
        self._fail_member_futures(member, error)
        self._deadlines.cancel(("hb", group.group_id, member.member_id))

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

    def _validate_member(self, group: Group, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            static_id = group.static_members.get(instance_id)
            if static_id is None:
                return int(E.unknown_member_id)
            if static_id != member_id:
                return int(E.fenced_instance_id)
        if member_id not in group.members:
            return int(E.unknown_member_id)
        return NONE

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

    # ------------------------------------------------------------------ offsets

    def validate_offset_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        transactional: bool = False,
        api_version: int = 9,
    ) -> int:
        """Whether this member may commit for the group (Kafka's validateOffsetCommit).

        Generation -1 with no member id is a "simple" commit, allowed while the group
        has no members. ``transactional=True`` is TxnOffsetCommit's variant: a request
        without member id, generation and instance id is not checked against the group.
        """
        err = self._coordinator_error(group_id)
        if err:
            return err
        group = self._groups.get(group_id)
        if group is None:
            if generation < 0 or transactional:
                return NONE
            return int(E.group_id_not_found) if api_version >= 9 else int(E.illegal_generation)
        if group.state == GroupState.DEAD:
            return int(E.coordinator_not_available)
        if generation < 0 and group.state == GroupState.EMPTY:
            return NONE
        if transactional and generation < 0 and not member_id and group_instance_id is None:
            return NONE
        if generation >= 0 or member_id or group_instance_id is not None:
            err = self._validate_member(group, member_id, group_instance_id)
            if err:
                return err
            if generation != group.generation:
                return int(E.illegal_generation)
        elif group.state != GroupState.EMPTY:
            return int(E.unknown_member_id)
        if group.state == GroupState.COMPLETING_REBALANCE:
            return int(E.rebalance_in_progress)
        return NONE

    def _validate_partitions(
        self, offsets: Iterable[OffsetEntry]
    ) -> tuple[dict[TopicPartition, int], list[OffsetEntry]]:
        errors: dict[TopicPartition, int] = {}
        valid: list[OffsetEntry] = []
        limit = self.config.offset_metadata_max_bytes
        for entry in offsets:
            topic, partition, _offset, _epoch, metadata = entry
            count = self.topic_partition_count(topic)
            if count is None or not 0 <= partition < count:
                errors[(topic, partition)] = int(E.unknown_topic_or_partition)
            elif metadata is not None and len(metadata.encode()) > limit:
                errors[(topic, partition)] = int(E.offset_metadata_too_large)
            else:
                errors[(topic, partition)] = NONE
                valid.append(entry)
        return errors, valid

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        offsets: list[OffsetEntry],
        *,
        group_instance_id: str | None = None,
        api_version: int = 9,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit: validates, persists, then applies; returns the error per partition."""
        err = self.validate_offset_commit(
            group_id, generation, member_id, group_instance_id, api_version=api_version
        )
        if err:
            return {(t, p): err for t, p, *_ in offsets}
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = Group(group_id)
        member = group.members.get(member_id)
        if member is not None and generation >= 0:
            self._schedule_heartbeat(group, member)
        errors, valid = self._validate_partitions(offsets)
        if not valid:
            return errors
        values: dict[TopicPartition, OffsetValue] = {}
        records: list[Record] = []
        for topic, partition, offset, epoch, metadata in valid:
            value = OffsetValue(offset, epoch, metadata, self._next_seq())
            values[(topic, partition)] = value
            records.append(store.offset_record(group_id, topic, partition, value))
        try:
            self._persist(group_id, records)
        except StorageError:
            log.exception("group %s: could not persist offsets", group_id)
            for tp in values:
                errors[tp] = int(E.coordinator_not_available)
            return errors
        self._offsets.setdefault(group_id, GroupOffsets()).committed.update(values)
        return errors

    def fetch_offsets(
        self,
        group_id: str,
        partitions: dict[str, list[int]] | None,
        *,
        require_stable: bool = False,
    ) -> tuple[int, dict[str, list[FetchedOffset]]]:
        """OffsetFetch: (group error, topic -> offsets). ``partitions=None`` means all.

        With ``require_stable`` a partition with a pending transactional offset answers
        UNSTABLE_OFFSET_COMMIT (the client retries until the transaction completes).
        For "all partitions" that includes partitions that have only a pending offset,
        so a client never mistakes "not committed yet" for "no offset".
        """
        err = self._coordinator_error(group_id)
        if err:
            return err, {}
        go = self._offsets.get(group_id) or GroupOffsets()
        if partitions is None:
            keys = set(go.committed)
            if require_stable:
                for pending in go.pending.values():
                    keys.update(pending)
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(keys):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = partitions
        result: dict[str, list[FetchedOffset]] = {}
        for topic, parts in wanted.items():
            out = result.setdefault(topic, [])
            for partition in parts:
                tp = (topic, partition)
                if require_stable and go.has_pending(tp):
                    out.append(FetchedOffset(partition, error=int(E.unstable_offset_commit)))
                    continue
                value = go.committed.get(tp)
                if value is None:
                    out.append(FetchedOffset(partition))
                else:
                    out.append(
                        FetchedOffset(
                            partition,
                            value.offset,
                            value.leader_epoch,
                            value.metadata if value.metadata is not None else "",
                        )
                    )
        return NONE, result

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, OffsetValue]:
        """A copy of the group's committed offsets (for tests and state dumps)."""
        go = self._offsets.get(group_id)
        return dict(go.committed) if go else {}

    # ------------------------------------------------------------------ transactional offsets

    def add_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: list[OffsetEntry],
    ) -> dict[TopicPartition, int]:
        """Record offsets committed inside an open transaction (TxnOffsetCommit).

        They stay invisible to OffsetFetch (and make require_stable fetches answer
        UNSTABLE_OFFSET_COMMIT) until ``complete_txn``. The caller validates the
        member/generation first with ``validate_offset_commit(..., transactional=True)``.
        """
        err = self._coordinator_error(group_id)
        if err:
            return {(t, p): err for t, p, *_ in offsets}
        errors, valid = self._validate_partitions(offsets)
        if not valid:
            return errors
        self._groups.setdefault(group_id, Group(group_id))
        values: dict[TopicPartition, OffsetValue] = {}
        records: list[Record] = []
        for topic, partition, offset, epoch, metadata in valid:
            value = OffsetValue(offset, epoch, metadata, self._next_seq())
            values[(topic, partition)] = value
            records.append(
                store.txn_offset_record(
                    group_id, producer_id, producer_epoch, topic, partition, value
                )
            )
        try:
            self._persist(group_id, records)
        except StorageError:
            log.exception("group %s: could not persist transactional offsets", group_id)
            for tp in values:
                errors[tp] = int(E.coordinator_not_available)
            return errors
        go = self._offsets.setdefault(group_id, GroupOffsets())
        go.pending.setdefault(producer_id, {}).update(values)
        go.pending_epochs[producer_id] = producer_epoch
        return errors

    def complete_txn(
        self, producer_id: int, commit: bool, *, group_ids: Iterable[str] | None = None
    ) -> list[str]:
        """Apply (commit) or drop (abort) a producer's pending transactional offsets.

        This is what a transaction marker on ``__consumer_offsets`` does in Kafka. A
        committed transactional offset does not replace a plain commit that was
        written after it. Returns the groups that had pending offsets. Raises
        StorageError if the log append fails (nothing is applied then).
        """
        candidates = list(self._offsets) if group_ids is None else list(group_ids)
        done: list[str] = []
        for group_id in candidates:
            go = self._offsets.get(group_id)
            if go is None or producer_id not in go.pending:
                continue
            pending = go.pending[producer_id]
            records: list[Record] = []
            applied: dict[TopicPartition, OffsetValue] = {}
            for (topic, partition), value in pending.items():
                records.append(
                    Record(store.txn_offset_key(group_id, producer_id, topic, partition), None)
                )
                if commit:
                    current = go.committed.get((topic, partition))
                    if current is None or current.seq < value.seq:
                        applied[(topic, partition)] = value
                        records.append(store.offset_record(group_id, topic, partition, value))
            self._persist(group_id, records)
            go.committed.update(applied)
            del go.pending[producer_id]
            go.pending_epochs.pop(producer_id, None)
            done.append(group_id)
        return done

    def has_pending_txn_offsets(self, group_id: str, producer_id: int | None = None) -> bool:
        go = self._offsets.get(group_id)
        if go is None:
            return False
        if producer_id is None:
            return go.has_pending()
        return bool(go.pending.get(producer_id))

    # ------------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] = ()) -> tuple[int, list[tuple[str, str, str]]]:
        """ListGroups: (error, [(group_id, protocol_type, state)]) for loaded partitions."""
        wanted = {s.lower() for s in states}
        if self._loading:
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
