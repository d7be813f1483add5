"""Transactions end to end at the protocol level: a real node (broker with
WriteTxnMarkers, LSO tracking) and the real transaction coordinator, talking Kafka
protocol over TCP, in one process.

The coordinator is served by its own KafkaServer here (the node does not wire it
yet); markers travel over ``PeerMarkerTransport`` to the node. Checked through
ListOffsets(read_committed): committed data becomes stable, aborted data is skipped
past, and a coordinator that dies between PrepareCommit and its markers completes the
commit after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from txnchaos.cluster.coordinator.transactions import (
    InitProducerIdApi,
    TransactionCoordinator,
    TxnConfig,
    create_transaction_coordinator,
)
from txnchaos.cluster.net.client import PeerConnection
from txnchaos.cluster.node import Node, NodeConfig
from txnchaos.cluster.producer_ids import ProducerIdBlocks
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.cluster.server.dispatch import ApiRegistry
from txnchaos.cluster.server.server import KafkaServer
from txnchaos.cluster.settings import NodeSettings

pytestmark = pytest.mark.integration

TOPIC = "e2e"


class Setup:
    def __init__(self, root: Path) -> None:
        self.root = root
        # The broker's KIP-890 verification would ask the node's own coordinator, which
        # does not know the transactions of the test's separate coordinator: off here.
        self.node = Node(
            NodeConfig(
                node_id=1,
                roles=frozenset({"broker", "coordinator"}),
                data_dir=root / "n1",
                settings=NodeSettings({"transaction.partition.verification.enable": "false"}),
            )
        )
        self.coordinator: TransactionCoordinator | None = None
        self.server: KafkaServer | None = None
        self.broken_marker_link = False
        self.conns: list[PeerConnection] = []

    def node_address(self, node_id: int) -> tuple[str, int] | None:
        if self.broken_marker_link:
            return ("127.0.0.1", 1)  # nothing listens there: markers cannot be delivered
        return self.node.node_address(node_id)

    async def start_coordinator(self) -> PeerConnection:
        source = self.node.source
        assert source is not None
        self.coordinator = create_transaction_coordinator(
            self.root / "txn",
            producer_ids=ProducerIdBlocks(source),
            view=source.view,
            refresh_view=source.refresh,
            node_address=self.node_address,
            internal_partition_owner=lambda p: 1,
            client_id="txnchaos-node-e2e",  # markers are server-only: it acts as a node
            config=TxnConfig(
                num_partitions=3,
                marker_retry_backoff_ms=20,
                marker_max_backoff_ms=100,
                marker_request_timeout_ms=2_000,
                abort_timed_out_interval_ms=0,
                remove_expired_interval_ms=0,
            ),
        )
        registry = ApiRegistry()
        self.coordinator.register(registry)
        InitProducerIdApi(ProducerIdBlocks(source), self.coordinator).register(registry)
        self.server = KafkaServer(registry)
        port = await self.server.start()
        await self.coordinator.start()
        return self.connect(port)

    async def stop_coordinator(self) -> None:
        """Like kill -9 of the coordinator: nothing more is written to its logs."""
        assert self.coordinator is not None and self.server is not None
        await self.server.stop()
        await self.coordinator.stop()

    def connect(self, port: int) -> PeerConnection:
        conn = PeerConnection("127.0.0.1", port, client_id="e2e")
        self.conns.append(conn)
        return conn

    async def close(self) -> None:
        for conn in self.conns:
            await conn.close()
        if self.server is not None:
            await self.server.stop()
        if self.coordinator is not None:
            await self.coordinator.stop()
        await self.node.stop()


@contextlib.asynccontextmanager
async def running(root: Path) -> AsyncIterator[Setup]:
    s = Setup(root)
    await s.node.start()
    try:
        assert s.node.source is not None
        await s.node.source.create_topics([TOPIC])
        yield s
    finally:
        await s.close()


async def call(conn: PeerConnection, api_key: int, version: int, **fields: Any) -> Any:
    return await conn.request(make(request_class(api_key, version), fields), timeout=20)


async def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def offsets(broker: PeerConnection) -> tuple[int, int]:
    """(high watermark, last stable offset) of partition 0."""
    out = []
    for isolation in (0, 1):
        r = await call(
            broker,
            2,
            7,
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        )
        p = r.topics[0].partitions[0]
        assert p.error_code == 0, p
        out.append(p.offset)
    return out[0], out[1]


async def produce(broker: PeerConnection, pid: int, epoch: int, seq: int, n: int) -> int:
    batch = encode_batch(
        [b"v%d" % i for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    r = await call(
        broker,
        0,
        10,
        transactional_id="tx",
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
    )
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0, p
    return p.base_offset


async def begin(coord: PeerConnection, pid: int, epoch: int) -> None:
    r = await call(
        coord,
        24,
        3,
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
    )
    codes = [
        p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    assert codes == [0], r


async def end(coord: PeerConnection, pid: int, epoch: int, commit: bool) -> int:
    r = await call(
        coord, 26, 3, transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit
    )
    return int(r.error_code)


def state(s: Setup) -> str:
    assert s.coordinator is not None
    md = s.coordinator.metadata("tx")
    return "" if md is None else md.state.value


def test_commit_abort_and_restart_mid_commit(tmp_path: Path) -> None:
    async def body() -> None:
        async with running(tmp_path) as s:
            coord = await s.start_coordinator()
            broker = s.connect(s.node.server.port)
            r = await call(
                coord, 22, 4, transactional_id="tx", transaction_timeout=60_000,
                producer_id=-1, producer_epoch=-1,
            )  # fmt: skip
            assert r.error_code == 0, r
            pid, epoch = r.producer_id, r.producer_epoch

            # 1. commit: the LSO reaches the end once the marker is written
            await begin(coord, pid, epoch)
            await produce(broker, pid, epoch, 0, 3)
            hw, lso = await offsets(broker)
            assert (hw, lso) == (3, 0)
            assert await end(coord, pid, epoch, True) == 0
            await wait_for(lambda: state(s) == "CompleteCommit", "commit to complete")
            assert await offsets(broker) == (4, 4)  # 3 records + commit marker

            # 2. abort: the LSO moves past the aborted records
            await begin(coord, pid, epoch)
            await produce(broker, pid, epoch, 3, 2)
            assert await offsets(broker) == (6, 4)
            assert await end(coord, pid, epoch, False) == 0
            await wait_for(lambda: state(s) == "CompleteAbort", "abort to complete")
            assert await offsets(broker) == (7, 7)

            # 3. the coordinator dies between PrepareCommit and the markers
            await begin(coord, pid, epoch)
            await produce(broker, pid, epoch, 5, 1)
            s.broken_marker_link = True
            assert await end(coord, pid, epoch, True) == 0
            assert state(s) == "PrepareCommit"
            await asyncio.sleep(0.2)  # markers keep failing meanwhile
            assert await offsets(broker) == (8, 7)
            await s.stop_coordinator()
            s.broken_marker_link = False
            coord = await s.start_coordinator()
            await wait_for(lambda: state(s) == "CompleteCommit", "commit after restart")
            assert await offsets(broker) == (9, 9)
            # The client's retry of EndTxn finds its commit done.
            assert await end(coord, pid, epoch, True) == 0

            # 4. a new producer instance fences the old one (epoch bump)
            r = await call(
                coord, 22, 4, transactional_id="tx", transaction_timeout=60_000,
                producer_id=-1, producer_epoch=-1,
            )  # fmt: skip
            assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
            assert await end(coord, pid, epoch, True) == 90  # PRODUCER_FENCED

    asyncio.run(asyncio.wait_for(body(), 60))
