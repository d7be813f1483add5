"""Helpers shared by the transaction-coordinator unit tests (no tests here).

The coordinator is driven through its real request handlers (kio requests built with
``make``), with a fake millisecond clock, a fake producer-id source and a fake marker
transport that records every WriteTxnMarkers request and answers with scripted
errors. Periodic tasks are driven by calling their step functions; markers by
``flush()``. Nothing depends on wall-clock timing.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from txnchaos.cluster.coordinator.transactions import (
    InitProducerIdApi,
    TransactionCoordinator,
    TransactionMetadata,
    TxnConfig,
)
from txnchaos.cluster.net.client import PeerUnavailable
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class, response_class
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext

T = TypeVar("T")

INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, MARKERS, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 27, 28

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER = 6
NOT_COORDINATOR = 16
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
COORDINATOR_FENCED = 52
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120

TOPICS = {"t1": 3, "t2": 2}
"""topic -> partition count known to the fake cluster."""


def async_test(fn: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 20))

    return wrapper


class FakeClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class FakePids:
    def __init__(self, start: int = 1000) -> None:
        self.next = start
        self.handed_out: list[int] = []

    async def next_id(self) -> int:
        pid = self.next
        self.next += 1
        self.handed_out.append(pid)
        return pid


class FakeRouting:
    """Every partition of a known topic is led by ``leaders.get(topic, 1)``;
    ``__consumer_offsets`` partitions by node 9."""

    def __init__(self) -> None:
        self.leaders: dict[str, int | None] = {}
        self.topics = dict(TOPICS)
        self.refreshes = 0

    def leader(self, topic: str, partition: int) -> int | None:
        if topic == "__consumer_offsets":
            return self.leaders.get(topic, 9)
        if not self.exists(topic, partition):
            return None
        return self.leaders.get(topic, 1)

    def exists(self, topic: str, partition: int) -> bool:
        if topic == "__consumer_offsets":
            return True
        return 0 <= partition < self.topics.get(topic, 0)

    async def refresh(self) -> None:
        self.refreshes += 1


class FakeTransport:
    """Records WriteTxnMarkers requests; answers NONE unless scripted otherwise.

    ``script[(topic, partition)]`` is a list of error codes returned by the next
    attempts for that partition; ``down`` holds nodes that are unreachable;
    ``handler`` (if set) computes the per-partition error itself.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[int, Any]] = []
        self.script: dict[tuple[str, int], list[int]] = {}
        self.down: set[int] = set()
        self.handler: Callable[[int, Any, str, int], int] | None = None

    async def send(self, node_id: int, request: Any) -> Any:
        self.requests.append((node_id, request))
        if node_id in self.down:
            raise PeerUnavailable(f"node {node_id} is down")
        markers = []
        for marker in request.markers:
            topics = []
            for topic in marker.topics:
                parts = []
                for p in topic.partition_indexes:
                    if self.handler is not None:
                        code = self.handler(node_id, marker, topic.name, p)
                    else:
                        queue = self.script.get((topic.name, p))
                        code = queue.pop(0) if queue else NONE
                    parts.append({"partition_index": p, "error_code": code})
                topics.append({"name": topic.name, "partitions": parts})
            markers.append({"producer_id": marker.producer_id, "topics": topics})
        return make(response_class(MARKERS, type(request).__version__), {"markers": markers})

    def markers(self) -> list[dict[str, Any]]:
        """Every marker sent, flattened: node, pid, epoch, commit, coordinator epoch, tps."""
        out = []
        for node, request in self.requests:
            for m in request.markers:
                out.append(
                    {
                        "node": node,
                        "pid": m.producer_id,
                        "epoch": m.producer_epoch,
                        "commit": m.transaction_result,
                        "coordinator_epoch": m.coordinator_epoch,
                        "tps": sorted((t.name, p) for t in m.topics for p in t.partition_indexes),
                    }
                )
        return out


def marker_identities(transport: FakeTransport) -> list[tuple[int, int, bool, int]]:
    """Every marker sent: (producer id, epoch, commit, transaction version)."""
    return [
        (m.producer_id, m.producer_epoch, bool(m.transaction_result), m.transaction_version)
        for _, request in transport.requests
        for m in request.markers
    ]


class Harness:
    """A transaction coordinator with its handlers on a real ApiRegistry."""

    def __init__(
        self,
        data_dir: Path,
        *,
        clock: FakeClock | None = None,
        pids: FakePids | None = None,
        transport: FakeTransport | None = None,
        routing: FakeRouting | None = None,
        transaction_version: Callable[[], int] | None = None,
        **config: Any,
    ) -> None:
        self.data_dir = data_dir
        self.clock = clock or FakeClock()
        self.pids = pids or FakePids()
        self.transport = transport or FakeTransport()
        self.routing = routing or FakeRouting()
        self.transaction_version = transaction_version
        config.setdefault("num_partitions", 5)
        config.setdefault("offsets_num_partitions", 5)
        config.setdefault("abort_timed_out_interval_ms", 0)
        config.setdefault("remove_expired_interval_ms", 0)
        config.setdefault("marker_retry_backoff_ms", 100)
        config.setdefault("marker_max_backoff_ms", 1000)
        self.config_kwargs = config
        self.coordinator = TransactionCoordinator(
            data_dir,
            producer_ids=self.pids,
            marker_transport=self.transport,
            marker_routing=self.routing,
            partition_exists=lambda t, p: 0 <= p < TOPICS.get(t, 0),
            config=TxnConfig(**config),
            clock_ms=self.clock,
            marker_clock_ms=self.clock,
            transaction_version=transaction_version,
        )
        self.registry = ApiRegistry()
        self.coordinator.register(self.registry)
        InitProducerIdApi(self.pids, self.coordinator).register(self.registry)

    def start(self, partitions: list[int] | None = None) -> Harness:
        """Load partitions without starting background tasks (tests drive them)."""
        for p in range(self.coordinator.num_partitions) if partitions is None else partitions:
            self.coordinator.load_partition(p)
        return self

    def crash(self) -> None:
        """Lose memory like kill -9: close the logs, keep the files."""
        for p in sorted(self.coordinator.loaded_partitions):
            self.coordinator.unload_partition(p)

    def restart(self, transport: FakeTransport | None = None) -> Harness:
        self.crash()
        return Harness(
            self.data_dir,
            clock=self.clock,
            pids=self.pids,
            transport=transport or self.transport,
            routing=self.routing,
            transaction_version=self.transaction_version,
            **self.config_kwargs,
        ).start()

    async def call(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        spec = self.registry.get(api_key)
        assert spec is not None and spec.min_version <= version <= spec.max_version
        ctx = RequestContext(api_key, version, 1, "c", "127.0.0.1:40000", 1)
        return await spec.handler(ctx, make(request_class(api_key, version), data))

    async def flush(self) -> None:
        await self.coordinator.markers.flush()

    # -- shorthands ----------------------------------------------------------------------

    async def init(
        self,
        txn_id: str | None = "tx",
        *,
        version: int = 4,
        pid: int = -1,
        epoch: int = -1,
        timeout_ms: int = 60_000,
    ) -> tuple[int, int, int]:
        resp = await self.call(
            INIT,
            version,
            {
                "transactional_id": txn_id,
                "transaction_timeout": timeout_ms,
                "producer_id": pid,
                "producer_epoch": epoch,
            },
        )
        return int(resp.error_code), resp.producer_id, resp.producer_epoch

    async def init_at_epoch(self, epoch: int) -> tuple[int, TransactionMetadata]:
        """A producer of ``tx`` initialised and moved to ``epoch`` (as if that many
        transactions had ended): its producer id and the coordinator's metadata."""
        _, pid, _ = await self.init()
        md = self.coordinator.metadata("tx")
        assert md is not None
        md.producer_epoch = epoch
        return pid, md

    async def add(
        self,
        pid: int,
        epoch: int,
        partitions: dict[str, list[int]],
        *,
        txn_id: str = "tx",
        version: int = 3,
    ) -> dict[tuple[str, int], int]:
        resp = await self.call(
            ADD_PARTITIONS,
            version,
            {
                "v3_and_below_transactional_id": txn_id,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [
                    {"name": t, "partitions": ps} for t, ps in partitions.items()
                ],
            },
        )
        return {
            (t.name, r.partition_index): int(r.partition_error_code)
            for t in resp.results_by_topic_v3_and_below
            for r in t.results_by_partition
        }

    async def add_offsets(
        self, pid: int, epoch: int, group: str, *, txn_id: str = "tx", version: int = 3
    ) -> int:
        resp = await self.call(
            ADD_OFFSETS,
            version,
            {
                "transactional_id": txn_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "group_id": group,
            },
        )
        return int(resp.error_code)

    async def end(
        self, pid: int, epoch: int, commit: bool, *, txn_id: str = "tx", version: int = 3
    ) -> int:
        resp = await self.call(
            END_TXN,
            version,
            {
                "transactional_id": txn_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": commit,
            },
        )
        return int(resp.error_code)

    async def end2(
        self, pid: int, epoch: int, commit: bool, *, txn_id: str = "tx", version: int = 5
    ) -> tuple[int, int, int]:
        """EndTxn v5+ (KIP-890 part 2): (error, producer id, producer epoch)."""
        resp = await self.call(
            END_TXN,
            version,
            {
                "transactional_id": txn_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": commit,
            },
        )
        if version < 5:  # no ids in the answer before v5
            return int(resp.error_code), -1, -1
        return int(resp.error_code), resp.producer_id, resp.producer_epoch

    def state(self, txn_id: str = "tx") -> str:
        md = self.coordinator.metadata(txn_id)
        return "" if md is None else md.state.value

    def assert_log_matches_memory(self) -> None:
        c = self.coordinator
        for p in c.loaded_partitions:
            assert c.persisted_state(p) == c.memory_state(p), f"partition {p}"
