"""TxnOffsetCommit (28) v0-v5, and the group side of transaction markers.

TxnOffsetCommit goes to the group's coordinator: the offsets are validated like an
OffsetCommit (``validate_offset_commit(..., transactional=True)``: a request without
member id / generation / instance id is not checked against the group) and kept as
pending offsets of the producer id until a marker for that producer id reaches the
group's ``__consumer_offsets`` partition (:func:`apply_offsets_marker`, called by the
node's WriteTxnMarkers handler): a commit marker makes them the committed offsets, an
abort marker drops them.

COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE below v2 (as
Kafka does for 0.11-2.0 clients that could not handle it).

With KIP-890 verification on, the first commit of a transaction's offsets for a group
is kept only after the transaction coordinator confirmed the transaction added the
group's offsets partition (``txn_offset_verification``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode as E

from ...server.dispatch import RequestContext
from .core import StorageError
from .offset_commit_shape import OffsetEntry, commit_entries, partition_errors
from .txn_offset_verification import TxnOffsetVerification

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

TXN_OFFSET_COMMIT = 28
MIN_VERSION = 0
MAX_VERSION = 5  # v4: TRANSACTION_ABORTABLE known; v5: implicit add under TV2 (KIP-890)
OWNER = "group-coordinator"


class TxnOffsetCommitApi:
    def __init__(
        self, coordinator: GroupCoordinator, verification: TxnOffsetVerification | None = None
    ) -> None:
        self.c = coordinator
        self.verification = verification

    def commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        entries: list[OffsetEntry],
        *,
        generation: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        api_version: int = 3,
    ) -> dict[tuple[str, int], int]:
        """Validate and record pending offsets; returns the error per partition."""
        err = self.c.validate_offset_commit(
            group_id,
            generation,
            member_id,
            group_instance_id,
            transactional=True,
            api_version=api_version,
        )
        if err:
            errors = {(t, p): err for t, p, *_ in entries}
        else:
            errors = self.c.add_txn_offsets(group_id, producer_id, producer_epoch, entries)
        if api_version < 2:
            loading = int(E.coordinator_load_in_progress)
            errors = {
                tp: int(E.coordinator_not_available) if e == loading else e
                for tp, e in errors.items()
            }
        return errors

    async def _verify(self, req: Any, version: int) -> int:
        """0, or the verification error for the whole request (see module doc)."""
        v = self.verification
        if v is None or not v.wanted(version) or not self.c.owns(req.group_id):
            return 0
        # Pending offsets show an ongoing transaction only to a verification; an implicit add
        # (TV2) always asks, since they may be the previous transaction's whose markers are
        # still on their way (the coordinator answers CONCURRENT_TRANSACTIONS until they land;
        # else that transaction's abort marker would drop this one's offsets).
        if not v.implicit_add(version) and self.c.has_pending_txn_offsets(
            req.group_id, req.producer_id
        ):
            return 0
        return await v.check(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            self.c.partition_for(req.group_id),
            version,
        )

    async def handle(self, ctx: RequestContext, req: Any) -> Any:
        entries = commit_entries(req.topics)
        refused = await self._verify(req, ctx.api_version)
        if refused:
            errors = {(t, p): refused for t, p, *_ in entries}
            return ctx.respond({"throttle_time": 0, "topics": partition_errors(req.topics, errors)})
        errors = self.commit(
            req.group_id,
            req.producer_id,
            req.producer_epoch,
            entries,
            generation=getattr(req, "generation_id", -1),
            member_id=getattr(req, "member_id", ""),
            group_instance_id=getattr(req, "group_instance_id", None),
            api_version=ctx.api_version,
        )
        return ctx.respond(
            {
                "throttle_time": 0,
                "topics": partition_errors(req.topics, errors),
            }
        )


def register_txn_offset_commit(
    registry: Any,
    coordinator: GroupCoordinator,
    verification: TxnOffsetVerification | None = None,
) -> TxnOffsetCommitApi:
    api = TxnOffsetCommitApi(coordinator, verification)
    registry.register(TXN_OFFSET_COMMIT, MIN_VERSION, MAX_VERSION, api.handle, owner=OWNER)
    return api


def apply_offsets_marker(
    coordinator: GroupCoordinator, producer_id: int, commit: bool, partitions: Iterable[int]
) -> dict[int, int]:
    """A transaction marker for ``__consumer_offsets`` partitions: commit or drop the
    producer's pending offsets of every group on those partitions.

    Returns the error per partition for the WriteTxnMarkers response: NOT_COORDINATOR
    for a partition this node does not serve (the transaction coordinator retries
    after refreshing its routing), KAFKA_STORAGE_ERROR if the log append failed
    (retried too). Applying a marker twice is harmless (nothing is pending the second
    time).
    """
    loaded = coordinator.loaded_partitions
    wanted = set(partitions)
    by_partition: dict[int, list[str]] = {p: [] for p in wanted}
    for group in coordinator.groups():
        p = coordinator.partition_for(group.group_id)
        if p in by_partition and coordinator.has_pending_txn_offsets(group.group_id, producer_id):
            by_partition[p].append(group.group_id)
    out: dict[int, int] = {}
    for p in sorted(wanted):
        if p not in loaded:
            out[p] = int(E.not_coordinator)
            continue
        try:
            coordinator.complete_txn(producer_id, commit, group_ids=by_partition[p])
        except StorageError:
            out[p] = int(E.kafka_storage_error)
            continue
        out[p] = 0
    return out


def group_marker_sink(
    coordinator: GroupCoordinator, verification: TxnOffsetVerification | None = None
) -> Callable[[int, int, bool, list[int]], Awaitable[dict[int, int]]]:
    """``apply_offsets_marker`` shaped as ``WriteTxnMarkersApi``'s ``group_sink``:
    ``(producer_id, producer_epoch, commit, partitions) -> {partition: error}``; the
    marker also invalidates verifications of the producer in flight there."""

    async def sink(
        producer_id: int, producer_epoch: int, commit: bool, partitions: list[int]
    ) -> dict[int, int]:
        if verification is not None:
            verification.marker(producer_id, producer_epoch, partitions)
        return apply_offsets_marker(coordinator, producer_id, commit, partitions)

    return sink


__all__ = [
    "TxnOffsetCommitApi",
    "apply_offsets_marker",
    "group_marker_sink",
    "register_txn_offset_commit",
]
