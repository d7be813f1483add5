"""What every part of the group coordinator shares: the groups and offsets of the loaded
partitions, their state logs, the deadline queue and the helpers over them.

The concerns built on it (``rebalance``/``membership``, ``offsets``, ``admin``) are
mixins of :class:`GroupCoordinatorCore`; ``coordinator.GroupCoordinator`` combines
them and owns the partition lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from ...storage.state_log import Record, StateLog
from ..partition_lifecycle import PartitionLifecycle
from . import store
from .config import GroupConfig
from .hashing import partition_for
from .model import Group, JoinResult, Member, SyncResult
from .store import GroupOffsets
from .timers import Deadlines

log = logging.getLogger(__name__)

NONE = int(E.none)


class StorageError(Exception):
    """Appending to a partition's state log failed."""


class GroupCoordinatorCore:
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
        self.config = config or GroupConfig()
        self._partitions = PartitionLifecycle(data_dir, num_partitions, self._open_log)
        self.data_dir = self._partitions.data_dir
        self.num_partitions = num_partitions
        self.topic_partition_count = topic_partition_count
        self.clock = clock
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, GroupOffsets] = {}
        self._deadlines = Deadlines()
        self._seq = 0
        self.rebalances_completed = 0
        """How many join phases produced a new generation (for tests and metrics)."""

    # ------------------------------------------------------------------ partitions

    def partition_for(self, group_id: str) -> int:
        """The internal partition of a group: Kafka's abs(hashCode) % num_partitions."""
        return partition_for(group_id, self.num_partitions)

    def owns(self, group_id: str) -> bool:
        """Whether this coordinator currently serves the group (its partition is loaded)."""
        return self._partitions.is_loaded(self.partition_for(group_id))

    @property
    def loaded_partitions(self) -> frozenset[int]:
        return self._partitions.loaded

    def _coordinator_error(self, group_id: str) -> int:
        return self._partitions.error(self.partition_for(group_id))

    def _open_log(self, data_dir: Path, partition: int) -> StateLog:
        return store.open_log(
            data_dir,
            partition,
            fsync=self.config.fsync,
            compact_min_bytes=self.config.compact_min_bytes,
        )

    # ------------------------------------------------------------------ timers

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

    # ------------------------------------------------------------------ persistence

    def _log_for(self, group_id: str) -> StateLog:
        slog = self._partitions.log(self.partition_for(group_id))
        if slog is None:
            raise StorageError(f"group {group_id}: its partition is not loaded")
        return slog

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

    # ------------------------------------------------------------------ members

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
