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

The concerns live in their own modules, combined here: ``rebalance`` (the state
machine and its timers), ``membership`` (JoinGroup/SyncGroup/Heartbeat/LeaveGroup),
``offsets`` (OffsetCommit/OffsetFetch, transactional offsets), ``admin``
(List/Describe/DeleteGroups); ``core`` holds the state they share. This module owns
the partition lifecycle (``partition_lifecycle``) and the timer task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode as E

from ...storage.state_log import StateLog
from . import store
from .admin import GroupAdmin, GroupSummary
from .core import StorageError
from .membership import Membership
from .model import Group, GroupState
from .offsets import FetchedOffset, Offsets

log = logging.getLogger(__name__)

__all__ = ["FetchedOffset", "GroupCoordinator", "GroupSummary", "StorageError"]


class GroupCoordinator(Membership, Offsets, GroupAdmin):
    """Classic consumer groups and their committed offsets (see ``GroupCoordinatorCore``
    for the constructor): serves the internal partitions it loads, runs the timers."""

    _ticker: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ partitions / life

    def load_partition(self, partition: int) -> None:
        """Become coordinator for one internal partition: replay its log into memory.

        Groups whose last record has a distributed assignment come back Stable with
        their members (whose session timers restart now), so a coordinator restart does
        not force a rebalance; a group persisted mid-rebalance restarts its rebalance.
        """
        if self._partitions.load(partition, self._restore):
            log.info("loaded group partition %d", partition)

    def _restore(self, slog: StateLog) -> None:
        loaded = store.replay(slog)
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

    def unload_partition(self, partition: int) -> None:
        """Stop serving a partition: pending JoinGroup/SyncGroup calls get NOT_COORDINATOR."""
        self._partitions.unload(partition, lambda: self._forget_partition(partition))

    def _forget_partition(self, partition: int) -> None:
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            for member in group.members.values():
                self._fail_member_futures(member, int(E.not_coordinator))
            self._cancel_group_timers(group_id)
            self._offsets.pop(group_id, None)

    async def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load state (all partitions unless told otherwise) and start the timer task."""
        for p in self._partitions.requested(partitions):
            self.load_partition(p)
        if self.config.timer_tick_ms > 0 and self._ticker is None:
            self._ticker = asyncio.create_task(self._run_timers(), name="group-coordinator-timers")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        for p in sorted(self.loaded_partitions):
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
