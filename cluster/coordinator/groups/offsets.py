"""Committed offsets of classic groups: OffsetCommit, OffsetFetch, and the pending
offsets of transactions (TxnOffsetCommit) that a transaction marker commits or drops.

Every change a client is told about is appended to the group's partition log before
it is applied and answered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode as E

from ...storage.state_log import Record
from . import store
from .core import NONE, GroupCoordinatorCore, StorageError
from .model import Group, GroupState, OffsetValue
from .offset_commit_shape import OffsetEntry
from .store import GroupOffsets, TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: int = NONE


class Offsets(GroupCoordinatorCore):
    """Plain and transactional offset commits, and offset fetches."""

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
