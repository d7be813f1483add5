"""Sending transaction markers (WriteTxnMarkers) until every partition has its marker.

When a transaction is PrepareCommit/PrepareAbort, each of its partitions needs a
commit/abort control record written by the node that leads it (for a
``__consumer_offsets`` partition: the group coordinator owning it, which applies or
drops the pending transactional offsets). The sender keeps one unit of work per
(transactional id, partition); a dispatch groups the due units by destination node
and sends one WriteTxnMarkers v1 request per node carrying every due marker for it, of
any number of transactions (at most ``max_in_flight`` requests in flight per node,
one by default, so a slow node does not hold up the others and markers that queue
meanwhile go together in the next request), then for each partition:

* NONE: written; the coordinator is told (it writes CompleteX once all are written).
* retriable errors (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_
  REPLICAS*, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, coordinator-loading errors of a
  group coordinator, unreachable node, unknown leader): retried with a doubling backoff
  after refreshing the cluster view. A transaction never stays in Prepare* while the
  nodes leading its partitions are reachable.
* INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: the broker has seen a newer
  producer epoch or coordinator epoch, so this marker is obsolete there: logged and
  dropped (Kafka drops it too). The coordinator counts the partition as resolved.
* UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION: dropped, as in Kafka.
* a partition whose topic has disappeared from the cluster view (deleted) is dropped
  after it stayed absent across several refreshes.

The transport is a small protocol so unit tests inject a fake; the real one keeps a
:class:`PeerConnection` per node at the address the lead's ``node_address`` gives
(which honours per-peer overrides, so the harness can proxy node-to-node links). Over
an established connection it writes the request at once and is answered through a
callback from the connection's data callback (``send_nowait``), with no task per
request. Its connections probe themselves when a request goes unanswered for
``stall_probe_s`` (``net.client``): a lost response then fails its request soon after
the network heals, not after the request timeout, so the node's markers are retried.

Dispatch is driven by :meth:`MarkerSender.dispatch_due` (a step function; tests call
:meth:`flush` with a fake clock) or, after :meth:`start`, by event-loop callbacks: once
per loop round in which markers were queued or a request completed (so the EndTxns
answered in one round share a request), and by a timer when backoffs end.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from ...metadata import NO_LEADER, ClusterView
from ...net.client import STALL_PROBE_S, PeerConnection, PeerUnavailable
from ...protocol.codec import request_class
from ...server.eager import eager_task

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

WRITE_TXN_MARKERS = 27
MARKER_VERSION = 2
"""WriteTxnMarkers v2 (KIP-890) says which transaction version wrote the marker, so a
broker checks a TV2 marker's bumped epoch as strictly newer than the data's. Markers
only go to this cluster's own brokers, which all serve v1-v2."""
GROUP_TOPIC = "__consumer_offsets"

RETRIABLE = frozenset(
    int(e)
    for e in (
        E.unknown_topic_or_partition,
        E.not_leader_or_follower,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
        E.kafka_storage_error,
        E.coordinator_load_in_progress,
        E.not_coordinator,
        E.coordinator_not_available,
    )
)
"""Errors after which the marker is retried (after a cluster-view refresh)."""

OBSOLETE = frozenset(int(e) for e in (E.invalid_producer_epoch, E.transaction_coordinator_fenced))
"""The broker has moved past this marker: drop it."""

UNSUPPORTED = frozenset(int(e) for e in (E.unsupported_for_message_format, E.unsupported_version))

GONE_STRIKES = 3
"""Dispatches (each after a view refresh) a partition's topic must be missing from the
view before its marker is dropped as "topic deleted"."""


class Outcome(enum.Enum):
    WRITTEN = "written"
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class MarkerSpec:
    """What one transaction's markers say; shared by all its partitions."""

    transactional_id: str
    txn_partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int = 0  # WriteTxnMarkers v2 (KIP-890), unused with v1


class MarkerTransport(Protocol):
    """Delivers one WriteTxnMarkers request to a node and returns its response.

    Raises ``PeerUnavailable`` / ``OSError`` / ``TimeoutError`` when the node cannot be
    reached or does not answer.
    """

    async def send(self, node_id: int, request: Any) -> Any: ...


class MarkerRouting(Protocol):
    def leader(self, topic: str, partition: int) -> int | None:
        """The node to send the partition's marker to; None if unknown/offline now."""
        ...

    def exists(self, topic: str, partition: int) -> bool:
        """Whether the partition exists in the current cluster view."""
        ...

    async def refresh(self) -> None:
        """Refresh the cluster view (after a routing error)."""
        ...


class ViewRouting:
    """Routes markers with the node's cluster view.

    Ordinary partitions go to ``view().topics[name].leaders[p]``;
    ``__consumer_offsets`` partitions go to ``internal_partition_owner(p)`` (the group
    coordinator owning it, as the node's placement says).
    """

    def __init__(
        self,
        view: Callable[[], ClusterView],
        internal_partition_owner: Callable[[int], int | None],
        refresh: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self._view = view
        self._owner = internal_partition_owner
        self._refresh = refresh

    def leader(self, topic: str, partition: int) -> int | None:
        if topic == GROUP_TOPIC:
            return self._owner(partition)
        meta = self._view().topic(topic)
        if meta is None or not 0 <= partition < meta.num_partitions:
            return None
        leader = meta.leaders[partition]
        return None if leader == NO_LEADER else leader

    def exists(self, topic: str, partition: int) -> bool:
        if topic == GROUP_TOPIC:
            return True
        meta = self._view().topic(topic)
        return meta is not None and 0 <= partition < meta.num_partitions

    async def refresh(self) -> None:
        if self._refresh is not None:
            await self._refresh()

    def version(self) -> object:
        """Changes whenever routes may have changed (the view object is replaced then),
        so the sender can keep a unit's route until it does."""
        return self._view()


class PeerMarkerTransport:
    """The real transport: one pipelined :class:`PeerConnection` per destination node."""

    def __init__(
        self,
        node_address: Callable[[int], tuple[str, int] | None],
        *,
        client_id: str = "txnchaos-txn-coordinator",
        request_timeout_s: float = 10.0,
        stall_probe_s: float = STALL_PROBE_S,
    ) -> None:
        self.node_address = node_address
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.stall_probe_s = stall_probe_s
        self._conns: dict[int, PeerConnection] = {}

    async def send(self, node_id: int, request: Any) -> Any:
        address = self.node_address(node_id)
        if address is None:
            raise PeerUnavailable(f"no address known for node {node_id}")
        conn = self._conns.get(node_id)
        if conn is not None and (conn.host, conn.port) != tuple(address):
            await conn.close()
            conn = None
        if conn is None:
            conn = PeerConnection(
                address[0], address[1], client_id=self.client_id, stall_probe_s=self.stall_probe_s
            )
            self._conns[node_id] = conn
        return await conn.request(request, timeout=self.request_timeout_s)

    def send_nowait(
        self, node_id: int, request: Any, callback: Callable[[Any, BaseException | None], None]
    ) -> bool:
        """Send now over an established connection, answering through ``callback``;
        False when that is not possible (no connection yet, address changed): the
        sender then uses ``send``."""
        conn = self._conns.get(node_id)
        if conn is None:
            return False
        address = self.node_address(node_id)
        if address is None or (conn.host, conn.port) != tuple(address):
            return False
        return conn.request_nowait(request, self.request_timeout_s, callback)

    async def close(self) -> None:
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            await conn.close()


#: The backoff reasons of a marker whose partition has no known leader.
_NO_ROUTE = frozenset({"no leader", "unknown partition"})


@dataclass(slots=True, eq=False)
class _Unit:
    spec: MarkerSpec
    tp: TopicPartition
    due_ms: int = 0
    attempts: int = 0
    in_flight: bool = False
    gone_strikes: int = 0
    last_error: str = ""
    node: int | None = None  # the route, valid while ``route_version`` is current
    route_version: object = None


@dataclass(slots=True)
class SenderStats:
    """Counters for the metrics layer."""

    requests: int = 0
    request_failures: int = 0
    markers_written: int = 0
    markers_dropped: int = 0
    retries: int = 0
    errors_by_code: dict[int, int] = field(default_factory=dict)


MarkerDone = Callable[[MarkerSpec, TopicPartition, Outcome], None]


class MarkerSender:
    def __init__(
        self,
        transport: MarkerTransport,
        routing: MarkerRouting,
        on_done: MarkerDone,
        *,
        clock_ms: Callable[[], int] | None = None,
        retry_backoff_ms: int = 50,
        max_backoff_ms: int = 1_000,
        max_in_flight: int = 1,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.max_in_flight = max_in_flight
        self.transport = transport
        self.routing = routing
        self.on_done = on_done
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.retry_backoff_ms = retry_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.stats = SenderStats()
        self._units: dict[tuple[str, TopicPartition], _Unit] = {}
        self._busy: set[int] = set()  # nodes with max_in_flight requests in flight
        self._in_flight: dict[int, int] = {}  # node -> requests in flight
        self._request_waiters: list[asyncio.Future[None]] = []  # flush() waiting
        self._tasks: set[asyncio.Future[None]] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        self._running = False
        self._kick_pending = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due_ms: int | None = None

    # ------------------------------------------------------------------ queue

    def enqueue(self, spec: MarkerSpec, partitions: Iterable[TopicPartition]) -> None:
        """Queue the markers of one transaction (replacing older ones for the same id)."""
        now = self.clock_ms()
        for tp in partitions:
            self._units[(spec.transactional_id, tp)] = _Unit(spec, tp, due_ms=now)
        self._kick()

    def cancel(self, transactional_id: str) -> None:
        for key in [k for k in self._units if k[0] == transactional_id]:
            del self._units[key]

    def cancel_txn_partition(self, txn_partition: int) -> None:
        """Forget the markers of every transaction of an unloaded coordinator partition."""
        for key in [k for k, u in self._units.items() if u.spec.txn_partition == txn_partition]:
            del self._units[key]

    def pending(self, transactional_id: str | None = None) -> dict[TopicPartition, str]:
        """Queued partitions (of one id, or all) with their last error (for describe/tests)."""
        return {
            u.tp: u.last_error
            for (tid, _), u in self._units.items()
            if transactional_id is None or tid == transactional_id
        }

    @property
    def idle(self) -> bool:
        return not self._units and not self._tasks and not self._in_flight

    @property
    def queued(self) -> int:
        """Markers not written yet (queued, backing off or in flight)."""
        return len(self._units)

    @property
    def unknown_destination(self) -> int:
        """Markers waiting for their partition's leader to be known (Kafka's
        TransactionMarkerChannelManager UnknownDestinationQueueSize)."""
        return sum(1 for u in self._units.values() if u.node is None and u.last_error in _NO_ROUTE)

    # ------------------------------------------------------------------ dispatch

    def dispatch_due(self) -> list[asyncio.Future[None]]:
        """Send every due marker whose destination has no request in flight.

        Returns the send tasks started (each resolves its units when its response
        arrives). Must run on the event loop.
        """
        now = self.clock_ms()
        by_node: dict[int, list[_Unit]] = {}
        want_refresh = False
        version_of = getattr(self.routing, "version", None)
        version = version_of() if version_of is not None else object()
        busy = self._busy
        for unit in list(self._units.values()):
            if unit.in_flight or unit.due_ms > now:
                continue
            if unit.route_version is version and unit.node is not None:
                if unit.node not in busy:
                    by_node.setdefault(unit.node, []).append(unit)
                continue  # a busy node's markers go when its request in flight completes
            node = self.routing.leader(*unit.tp)
            unit.node, unit.route_version = node, version
            if node is None:
                want_refresh = True
                if self.routing.exists(*unit.tp):
                    unit.gone_strikes = 0
                    self._backoff(unit, now, "no leader")
                else:
                    unit.gone_strikes += 1
                    if unit.gone_strikes >= GONE_STRIKES:
                        log.info(
                            "%s: partition %s-%d no longer exists; dropping its marker",
                            unit.spec.transactional_id,
                            *unit.tp,
                        )
                        self._resolve(unit, Outcome.DROPPED)
                    else:
                        self._backoff(unit, now, "unknown partition")
                continue
            unit.gone_strikes = 0
            by_node.setdefault(node, []).append(unit)
        started: list[asyncio.Future[None]] = []
        for node, units in by_node.items():
            if node in self._busy:
                continue  # picked up when the node's request in flight completes
            batch = self._one_marker_per_producer(units)
            for unit in batch:
                unit.in_flight = True
            count = self._in_flight.get(node, 0) + 1
            self._in_flight[node] = count
            if count >= self.max_in_flight:
                self._busy.add(node)
            task = self._start_send(node, batch)
            if task is not None:
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                started.append(task)
        if want_refresh:
            self._request_refresh()
        return started

    @staticmethod
    def _one_marker_per_producer(units: list[_Unit]) -> list[_Unit]:
        """WriteTxnMarkers answers per producer id: never put two markers (different
        transactions) of one producer id in the same request."""
        chosen: dict[int, MarkerSpec] = {}
        batch = []
        for unit in units:
            spec = unit.spec
            first = chosen.setdefault(spec.producer_id, spec)
            if first is spec or first == spec:
                batch.append(unit)
        return batch

    def _build_request(self, units: list[_Unit]) -> Any:
        """One WriteTxnMarkers request for a batch of ``_one_marker_per_producer``
        (so the units of one producer id share one spec)."""
        by_pid: dict[int, tuple[MarkerSpec, dict[str, list[int]]]] = {}
        for unit in units:
            entry = by_pid.get(unit.spec.producer_id)
            if entry is None:
                entry = by_pid[unit.spec.producer_id] = (unit.spec, {})
            topic, partition = unit.tp
            parts = entry[1].get(topic)
            if parts is None:
                entry[1][topic] = [partition]
            else:
                parts.append(partition)
        request_cls, marker_cls, topic_cls = _marker_classes(MARKER_VERSION)
        with_tv = MARKER_VERSION >= 2
        markers = []
        for spec, topics in by_pid.values():
            fields: dict[str, Any] = {
                "producer_id": spec.producer_id,
                "producer_epoch": spec.producer_epoch,
                "transaction_result": spec.commit,
                "topics": tuple(
                    topic_cls(name=name, partition_indexes=tuple(sorted(parts)))
                    for name, parts in sorted(topics.items())
                ),
                "coordinator_epoch": spec.coordinator_epoch,
            }
            if with_tv:
                fields["transaction_version"] = spec.transaction_version
            markers.append(marker_cls(**fields))
        return request_cls(markers=tuple(markers))

    def _start_send(self, node: int, units: list[_Unit]) -> asyncio.Future[None] | None:
        """Send one request; None when the transport took it with a callback (no task)."""
        self.stats.requests += 1
        request = self._build_request(units)
        send_nowait = getattr(self.transport, "send_nowait", None)
        if send_nowait is not None and send_nowait(
            node, request, lambda response, exc: self._on_sent(node, units, response, exc)
        ):
            return None
        # Started eagerly: the request is written now, not a loop round later.
        return eager_task(self._send(node, units, request))

    async def _send(self, node: int, units: list[_Unit], request: Any) -> None:
        try:
            response = await self.transport.send(node, request)
        except asyncio.CancelledError:
            for unit in units:
                unit.in_flight = False
            self._request_done(node)
            raise
        except Exception as exc:
            self._on_sent(node, units, None, exc)
        else:
            self._on_sent(node, units, response, None)

    def _on_sent(
        self, node: int, units: list[_Unit], response: Any, exc: BaseException | None
    ) -> None:
        try:
            if isinstance(exc, PeerUnavailable | OSError | TimeoutError):
                self.stats.request_failures += 1
                log.info("WriteTxnMarkers to node %d failed: %s; retrying", node, exc)
                now = self.clock_ms()
                for unit in units:
                    self._backoff(unit, now, f"node {node}: {exc}")
                self._request_refresh()
            elif exc is not None:
                self.stats.request_failures += 1
                log.error(
                    "WriteTxnMarkers to node %d failed unexpectedly; retrying", node, exc_info=exc
                )
                now = self.clock_ms()
                for unit in units:
                    self._backoff(unit, now, "unexpected failure")
            else:
                self._handle_response(node, units, response)
        finally:
            for unit in units:
                unit.in_flight = False
            self._request_done(node)
            self._kick()

    def _request_done(self, node: int) -> None:
        count = self._in_flight.get(node, 0) - 1
        if count > 0:
            self._in_flight[node] = count
        else:
            self._in_flight.pop(node, None)
        self._busy.discard(node)
        if self._request_waiters:
            waiters, self._request_waiters = self._request_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _handle_response(self, node: int, units: list[_Unit], response: Any) -> None:
        errors: dict[tuple[int, str, int], int] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for part in topic.partitions:
                    errors[(marker.producer_id, topic.name, part.partition_index)] = int(
                        part.error_code
                    )
        now = self.clock_ms()
        refresh = False
        for unit in units:
            if self._units.get((unit.spec.transactional_id, unit.tp)) is not unit:
                continue  # cancelled or replaced while in flight
            code = errors.get((unit.spec.producer_id, *unit.tp))
            if code is None:
                self._backoff(unit, now, f"node {node} did not answer for the partition")
                continue
            if code:
                self.stats.errors_by_code[code] = self.stats.errors_by_code.get(code, 0) + 1
            if code == 0:
                self._resolve(unit, Outcome.WRITTEN)
            elif code in OBSOLETE or code in UNSUPPORTED:
                log.warning(
                    "%s: marker for %s-%d (producer %d epoch %d, coordinator epoch %d) "
                    "refused by node %d with %s; dropping it",
                    unit.spec.transactional_id,
                    *unit.tp,
                    unit.spec.producer_id,
                    unit.spec.producer_epoch,
                    unit.spec.coordinator_epoch,
                    node,
                    E(code).name,
                )
                self._resolve(unit, Outcome.DROPPED)
            else:
                if code not in RETRIABLE:
                    log.warning(
                        "%s: unexpected error %s writing the marker for %s-%d; retrying",
                        unit.spec.transactional_id,
                        _name(code),
                        *unit.tp,
                    )
                refresh = True
                self._backoff(unit, now, _name(code))
        if refresh:
            self._request_refresh()

    def _resolve(self, unit: _Unit, outcome: Outcome) -> None:
        key = (unit.spec.transactional_id, unit.tp)
        if self._units.get(key) is unit:
            del self._units[key]
        if outcome is Outcome.WRITTEN:
            self.stats.markers_written += 1
        else:
            self.stats.markers_dropped += 1
        try:
            self.on_done(unit.spec, unit.tp, outcome)
        except Exception:
            log.exception("marker completion callback failed for %s", unit.spec.transactional_id)

    def _backoff(self, unit: _Unit, now: int, reason: str) -> None:
        unit.node = None  # route again (after the cluster view refresh)
        unit.attempts += 1
        unit.last_error = reason
        self.stats.retries += 1
        delay = min(self.retry_backoff_ms * (2 ** min(unit.attempts - 1, 16)), self.max_backoff_ms)
        unit.due_ms = now + delay

    def _request_refresh(self) -> None:
        if self._refresh_task is not None and not self._refresh_task.done():
            return

        async def refresh() -> None:
            try:
                await self.routing.refresh()
            except Exception as exc:  # the next attempt will try again
                log.info("cluster view refresh for markers failed: %s", exc)
            self._kick()

        self._refresh_task = asyncio.ensure_future(refresh())

    def next_due_ms(self) -> int | None:
        """When the earliest backed-off marker becomes due (None: nothing waiting)."""
        now = self.clock_ms()
        dues = [u.due_ms for u in self._units.values() if not u.in_flight and u.due_ms > now]
        return min(dues) if dues else None

    async def flush(self) -> None:
        """Dispatch until nothing is due and no request is in flight (tests: with a fake
        clock, backed-off markers stay queued until the clock is advanced)."""
        while True:
            started = self.dispatch_due()
            pending: list[asyncio.Future[Any]] = [t for t in self._tasks if not t.done()]
            if self._refresh_task is not None and not self._refresh_task.done():
                pending.append(self._refresh_task)
            if not pending and self._in_flight:
                # requests sent with send_nowait: wait until one of them completes
                waiter = asyncio.get_running_loop().create_future()
                self._request_waiters.append(waiter)
                pending.append(waiter)
            if not pending:
                if started:
                    continue  # sends that finished at once may have left more to send
                return
            await asyncio.gather(*pending, return_exceptions=True)

    # ------------------------------------------------------------------ background

    def start(self) -> None:
        """Dispatch in the background from now on: whenever markers are queued, a
        request completes or a backoff ends (event-loop callbacks, no polling task)."""
        self._running = True
        self._kick()

    async def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            task.cancel()
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        close = getattr(self.transport, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()

    def _kick(self) -> None:
        """Dispatch soon: once per event-loop round however many markers were queued in
        it, so the EndTxns answered together share one request per node."""
        if not self._running or self._kick_pending:
            return
        self._kick_pending = True
        asyncio.get_running_loop().call_soon(self._on_kick)

    def _on_kick(self) -> None:
        self._kick_pending = False
        if not self._running:
            return
        try:
            self.dispatch_due()
        except Exception:
            log.exception("marker dispatch failed")
        self._arm_timer()

    def _arm_timer(self) -> None:
        """Wake up when the earliest backed-off marker becomes due."""
        due = self.next_due_ms()
        if due == self._timer_due_ms and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_due_ms = due
        if due is not None:
            delay = max(due - self.clock_ms(), 1) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_due_ms = None
        self._kick()


@cache
def _marker_classes(version: int) -> tuple[Any, Any, Any]:
    """kio's WriteTxnMarkersRequest, WritableTxnMarker and WritableTxnMarkerTopic classes
    (built directly: ``make`` costs more than the rest of a dispatch)."""
    request_cls = request_class(WRITE_TXN_MARKERS, version)
    module = sys.modules[request_cls.__module__]
    return request_cls, module.WritableTxnMarker, module.WritableTxnMarkerTopic


def _name(code: int) -> str:
    try:
        return E(code).name
    except ValueError:
        return str(code)


__all__ = [
    "GROUP_TOPIC",
    "MarkerRouting",
    "MarkerSender",
    "MarkerSpec",
    "MarkerTransport",
    "Outcome",
    "PeerMarkerTransport",
    "SenderStats",
    "ViewRouting",
]
