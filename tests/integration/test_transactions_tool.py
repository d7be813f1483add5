"""``txnchaos transactions`` (KIP-664) against real nodes: a hanging transaction (a
transactional Produce from an old client that never added the partition to its
transaction, so no coordinator will ever end it: verification off, TV0) is found by
``find-hanging`` (and a live transaction next to it is not), ``abort --start-offset``
clears it, the LSO advances and a read_committed consumer reads past it; an abort of a
transaction the coordinator still has leaves the coordinator consistent when it later
times that transaction out."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition

from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.local import LocalCluster
from txnchaos.jobs.cli import main

from ..conftest import start_cluster
from .raw_client import RawClient, address
from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration

TOPIC = "orders"
HOUR_MS = 3_600_000
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two brokers (node 1 also coordinates); old-client rules: no verification, TV0;
    timed-out transactions aborted within a fraction of a second."""
    c = start_cluster(
        tmp_path_factory.mktemp("txn-tool"),
        brokers=2,
        settings=[
            "transaction.version=0",
            "transaction.partition.verification.enable=false",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=100",
        ],
    )
    create_topic(c.state()["bootstrap"], TOPIC, 2)
    yield c
    c.down()


@pytest.fixture(scope="module")
def bootstrap(cluster: LocalCluster) -> str:
    return str(cluster.state()["bootstrap"])


def tool(*args: str) -> Any:
    """Run ``txnchaos transactions ...`` in-process; the parsed ``--json`` output."""
    result = CliRunner().invoke(main, ["transactions", *args, "--json"])
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def leader_client(bootstrap: str, topic: str, partition: int) -> RawClient:
    seed = RawClient(*address(bootstrap))
    try:
        md = seed.request(
            3,
            12,
            topics=[{"name": topic, "topic_id": None}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    finally:
        seed.close()
    leader = md.topics[0].partitions[partition].leader_id
    broker = next(b for b in md.brokers if b.node_id == leader)
    return RawClient(broker.host, broker.port)


def init_producer(bootstrap: str, txn_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    """InitProducerId v1 (an old client) at the transactional id's coordinator."""
    seed = RawClient(*address(bootstrap))
    try:
        found = seed.request(10, 3, key=txn_id, key_type=1)
        assert int(found.error_code) == 0, found
    finally:
        seed.close()
    coordinator = RawClient(found.host, found.port)
    try:
        r = coordinator.request(22, 1, transactional_id=txn_id, transaction_timeout=timeout_ms)
        assert int(r.error_code) == 0, r
        return int(r.producer_id), int(r.producer_epoch)
    finally:
        coordinator.close()


def produce_without_add(
    bootstrap: str, txn_id: str, pid: int, epoch: int, partition: int, timestamp_ms: int
) -> int:
    """A transactional Produce v10 to a partition never added to the transaction; the
    base offset it got."""
    leader = leader_client(bootstrap, TOPIC, partition)
    try:
        batch = encode_batch(
            [b"stuck"],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            transactional=True,
            timestamp_ms=timestamp_ms,
        )
        r = leader.request(
            0,
            10,
            transactional_id=txn_id,
            acks=-1,
            timeout=10_000,
            topic_data=[
                {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}
            ],
        )
        p = r.responses[0].partition_responses[0]
        assert int(p.error_code) == 0, p
        return int(p.base_offset)
    finally:
        leader.close()


def offsets(bootstrap: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of a partition (ListOffsets at its leader)."""
    leader = leader_client(bootstrap, TOPIC, partition)
    try:
        return leader.latest_offset(TOPIC, partition, 1), leader.latest_offset(TOPIC, partition)
    finally:
        leader.close()


def wait_for(condition: Callable[[], bool], what: str, attempts: int = 300) -> None:
    """Poll ``condition`` (bounded: ``attempts`` rounds of 0.1 s); fail naming ``what``."""
    for _ in range(attempts):
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def read_committed(bootstrap: str, partition: int, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{partition}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        values: list[bytes] = []
        for _ in range(300):
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                values.append(m.value())
            if len(values) >= expected:
                break
        return values
    finally:
        consumer.close()


def late_partitions(cluster: LocalCluster) -> float:
    """PartitionsWithLateTransactionsCount summed over the nodes."""
    total = 0.0
    for node in cluster.state()["nodes"]:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{node['metrics_port']}/metrics", timeout=10
        ) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name == "kafka_server_replicamanager_partitionswithlatetransactionscount":
                    total += float(value)
    return total


def test_find_hanging_finds_exactly_it_and_abort_clears_it(
    cluster: LocalCluster, bootstrap: str
) -> None:
    now = int(time.time() * 1000)
    # The hanging transaction: partition 1, stamped two hours ago.
    pid, epoch = init_producer(bootstrap, "stuck")
    start = produce_without_add(bootstrap, "stuck", pid, epoch, 1, now - 2 * HOUR_MS)
    # A live transaction, as old, that its coordinator knows (partition 0 is in it).
    live = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "live",
            "transaction.timeout.ms": 600_000,
        }
    )
    live.init_transactions(30)
    live.begin_transaction()
    live.produce(TOPIC, b"live", partition=0, timestamp=now - 2 * HOUR_MS)
    assert live.flush(30) == 0
    # Committed records after the hanging one: read_committed cannot see them yet.
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        plain.produce(TOPIC, b"after-%d" % i, partition=1)
    assert plain.flush(30) == 0
    lso, hw = offsets(bootstrap, 1)
    assert (lso, hw) == (start, start + 4)
    # Both transactions started two hours ago: longer than transaction.max.timeout.ms
    # (15 minutes) plus the 5 minutes of padding.
    assert late_partitions(cluster) == 2

    found = tool(
        "find-hanging",
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--max-transaction-timeout",
        "60",
    )
    assert [(h["topic"], h["partition"], h["producer_id"], h["start_offset"]) for h in found] == [
        (TOPIC, 1, pid, start)
    ]
    assert found[0]["producer_epoch"] == epoch and found[0]["duration_s"] >= 2 * 3600
    # --broker: the partitions that broker holds (each partition has one replica here)
    leader = leader_client(bootstrap, TOPIC, 1)
    leader_port = leader.conn.port
    leader.close()
    nodes = cluster.state()["nodes"]
    leader_id = next(n["id"] for n in nodes if n["port"] == leader_port)

    def without_duration(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in h.items() if k != "duration_s"} for h in items]

    for n in nodes:  # (durations: each run has its own "now")
        got = tool("find-hanging", "--bootstrap", bootstrap, "--broker", str(n["id"]))
        assert without_duration(got) == without_duration(found if n["id"] == leader_id else [])
    # nothing is late by three hours
    assert (
        tool(
            "find-hanging",
            "--bootstrap",
            bootstrap,
            "--topic",
            TOPIC,
            "--max-transaction-timeout",
            "180",
        )
        == []
    )

    done = tool(
        "abort",
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--partition",
        "1",
        "--start-offset",
        str(start),
    )
    assert (done["producer_id"], done["producer_epoch"]) == (pid, epoch)
    lso, hw = offsets(bootstrap, 1)
    assert lso == hw == start + 5  # the abort marker, then everything is stable
    assert late_partitions(cluster) == 1  # the live one
    assert read_committed(bootstrap, 1, 3) == [b"after-0", b"after-1", b"after-2"]
    assert (
        tool(
            "find-hanging",
            "--bootstrap",
            bootstrap,
            "--topic",
            TOPIC,
            "--max-transaction-timeout",
            "60",
        )
        == []
    )
    live.commit_transaction(30)
    wait_for(lambda: late_partitions(cluster) == 0, "the live transaction's commit marker")


def table_of(*args: str) -> list[list[str]]:
    """The table a verb prints (no ``--json``), split into whitespace-separated cells."""
    result = CliRunner().invoke(main, ["transactions", *args])
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return [line.split() for line in result.stdout.splitlines()]


def test_list_describe_and_describe_producers(bootstrap: str) -> None:
    pid, epoch = init_producer(bootstrap, "idle")  # Empty: no transaction in progress
    live = Producer({"bootstrap.servers": bootstrap, "transactional.id": "shown"})
    live.init_transactions(30)
    live.begin_transaction()
    live.produce(TOPIC, b"shown", partition=0)
    assert live.flush(30) == 0
    try:
        rows = table_of("list", "--bootstrap", bootstrap)
        assert rows[0] == ["TransactionalId", "ProducerId", "Coordinator", "State"]
        states = {r[0]: r[3] for r in rows[1:]}
        assert states["shown"] == "Ongoing" and states["idle"] == "Empty"
        ongoing = tool("list", "--bootstrap", bootstrap, "--state-filter", "Ongoing")
        assert "shown" in {t["transactional_id"] for t in ongoing}
        assert "idle" not in {t["transactional_id"] for t in ongoing}
        by_pid = tool("list", "--bootstrap", bootstrap, "--producer-id-filter", str(pid))
        assert [(t["transactional_id"], t["state"]) for t in by_pid] == [("idle", "Empty")]
        pattern = tool("list", "--bootstrap", bootstrap, "--transactional-id-pattern", "sh.*")
        assert [t["transactional_id"] for t in pattern] == ["shown"]
        long_running = tool("list", "--bootstrap", bootstrap, "--duration-filter", "3600000")
        assert "shown" not in {t["transactional_id"] for t in long_running}

        rows = table_of("describe", "--bootstrap", bootstrap, "--transactional-id", "shown")
        assert rows[0] == [
            "ProducerId",
            "ProducerEpoch",
            "Coordinator",
            "State",
            "TimeoutMs",
            "TopicPartitions",
        ]
        assert rows[1][3:] == ["Ongoing", "60000", f"{TOPIC}-0"]
        shown = tool("describe", "--bootstrap", bootstrap, "--transactional-id", "shown")
        assert shown["start_time_ms"] > 0
        # No transaction in progress: TransactionStartTimeMs is -1 on the wire.
        idle = tool("describe", "--bootstrap", bootstrap, "--transactional-id", "idle")
        assert (idle["producer_id"], idle["producer_epoch"], idle["state"]) == (pid, epoch, "Empty")
        assert idle["start_time_ms"] is None and idle["topic_partitions"] == []

        rows = table_of(
            "describe-producers", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0"
        )
        assert rows[0] == [
            "ProducerId",
            "ProducerEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(s)",
            "CoordinatorEpoch",
        ]
        producers = tool(
            "describe-producers", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0"
        )
        mine = [p for p in producers if p["producer_id"] == shown["producer_id"]]
        assert len(mine) == 1 and mine[0]["start_offset"] is not None
        assert mine[0]["producer_epoch"] == shown["producer_epoch"]
        agrees_with_kafka_python(bootstrap, producers)
        refused(
            ["describe", "--bootstrap", bootstrap, "--transactional-id", "nobody"],
            "TRANSACTIONAL_ID_NOT_FOUND",
        )
        refused(
            ["describe-producers", "--bootstrap", bootstrap, "--topic", "nope", "--partition", "0"],
            "UNKNOWN_TOPIC_OR_PARTITION",
        )
    finally:
        live.commit_transaction(30)


def refused(args: list[str], named: str) -> None:
    """The verb exits 2 with one line on stderr naming ``named``."""
    result = CliRunner().invoke(main, ["transactions", *args])
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.stderr


def agrees_with_kafka_python(bootstrap: str, producers: list[dict[str, Any]]) -> None:
    """kafka-python's admin client (an independent implementation) sees what the tool sees."""
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        listed = admin.list_transactions()
        theirs = {
            (t.transactional_id, t.producer_id, t.state) for ts in listed.values() for t in ts
        }
        ours = {
            (t["transactional_id"], t["producer_id"], t["state"])
            for t in tool("list", "--bootstrap", bootstrap)
        }
        assert theirs == ours
        tp = KafkaTopicPartition(TOPIC, 0)
        state = admin.describe_producers([tp])[tp]
        assert sorted(
            (p.producer_id, p.producer_epoch, p.current_transaction_start_offset)
            for p in state.active_producers
        ) == sorted(
            (
                p["producer_id"],
                p["producer_epoch"],
                -1 if p["start_offset"] is None else p["start_offset"],
            )
            for p in producers
        )
    finally:
        admin.close()


def write_marker(
    bootstrap: str,
    client_id: str,
    pid: int,
    epoch: int,
    coordinator_epoch: int,
    partition: int = 0,
) -> int:
    """An ABORT WriteTxnMarkers for a partition from ``client_id``; its error code."""
    leader = leader_client(bootstrap, TOPIC, partition)
    admin = RawClient(leader.conn.host, leader.conn.port, client_id=client_id)
    leader.close()
    try:
        r = admin.request(
            27,
            1,
            markers=[
                {
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "transaction_result": False,
                    "coordinator_epoch": coordinator_epoch,
                    "topics": [{"name": TOPIC, "partition_indexes": [partition]}],
                }
            ],
        )
        return int(r.markers[0].topics[0].partitions[0].error_code)
    finally:
        admin.close()


def add_partition_zero(bootstrap: str, txn_id: str, pid: int, epoch: int) -> None:
    seed = RawClient(*address(bootstrap))
    found = seed.request(10, 3, key=txn_id, key_type=1)
    seed.close()
    coordinator = RawClient(found.host, found.port)
    try:
        r = coordinator.request(
            24,
            3,
            v3_and_below_transactional_id=txn_id,
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
    finally:
        coordinator.close()


def test_admin_abort_rules_and_the_coordinator_timing_out_afterwards(bootstrap: str) -> None:
    """The leader's rules for an operator's abort over the wire, then the coordinator
    times the same transaction out (epoch bump, abort marker) and ends CompleteAbort."""
    pid, epoch = init_producer(bootstrap, "timed", timeout_ms=2_000)
    add_partition_zero(bootstrap, "timed", pid, epoch)
    start = produce_without_add(bootstrap, "timed", pid, epoch, 0, int(time.time() * 1000))
    assert (
        tool("describe", "--bootstrap", bootstrap, "--transactional-id", "timed")["state"]
        == "Ongoing"
    )
    admin_id = "adminclient-1"  # any client id: no prefix is special (Kafka)
    assert write_marker(bootstrap, admin_id, pid, epoch + 1, -1) == INVALID_PRODUCER_EPOCH
    assert write_marker(bootstrap, admin_id, pid + 1000, 0, -1) == INVALID_TXN_STATE
    lso, hw = offsets(bootstrap, 0)
    assert lso <= start < hw  # refused: nothing written, still open

    # The form for older brokers, through the tool: id, epoch, coordinator epoch.
    producers = tool(
        "describe-producers", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0"
    )
    (mine,) = [p for p in producers if p["producer_id"] == pid]
    tool(
        "abort",
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--partition",
        "0",
        "--producer-id",
        str(pid),
        "--producer-epoch",
        str(epoch),
        "--coordinator-epoch",
        str(mine["coordinator_epoch"]),
    )
    assert offsets(bootstrap, 0)[0] > start  # the LSO moved past it
    # Nothing open any more: a second abort is refused (no open transaction).
    assert write_marker(bootstrap, admin_id, pid, epoch, -1) == INVALID_TXN_STATE
    # KIP-664's admin form (coordinator epoch -1) over the wire: accepted, the LSO moves
    # (tests/cluster/broker/test_admin_abort_markers.py: also past a known coordinator epoch).
    other_pid, other_epoch = init_producer(bootstrap, "seed-form")
    first = produce_without_add(
        bootstrap, "seed-form", other_pid, other_epoch, 1, int(time.time() * 1000)
    )
    assert offsets(bootstrap, 1)[0] == first
    assert write_marker(bootstrap, admin_id, other_pid, other_epoch, -1, partition=1) == 0
    lso, hw = offsets(bootstrap, 1)
    assert lso == hw > first

    def coordinator_done() -> bool:
        d = tool("describe", "--bootstrap", bootstrap, "--transactional-id", "timed")
        return d["state"] == "CompleteAbort"

    wait_for(coordinator_done, "the coordinator timing out the aborted transaction")
    d = tool("describe", "--bootstrap", bootstrap, "--transactional-id", "timed")
    assert d["producer_epoch"] == epoch + 1  # bumped by the timeout (TV0/1 fencing)
    after = tool(
        "describe-producers", "--bootstrap", bootstrap, "--topic", TOPIC, "--partition", "0"
    )
    (mine,) = [p for p in after if p["producer_id"] == pid]
    assert (mine["producer_epoch"], mine["start_offset"]) == (epoch + 1, None)
