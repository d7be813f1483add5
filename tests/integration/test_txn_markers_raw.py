"""WriteTxnMarkers at the protocol level against a real node, read back by
confluent-kafka consumers in read_committed and read_uncommitted mode."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from txnchaos.cluster.protocol.records import encode_batch

from ..conftest import start_cluster
from .raw_client import AS_NODE, RawClient
from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cluster whose brokers do not verify transactional writes (KIP-890): these tests
    play the coordinator themselves, with producer ids no coordinator handed out."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("markers-raw"),
        brokers=2,
        settings=["transaction.partition.verification.enable=false"],
    )
    yield cluster.state()["bootstrap"]
    cluster.down()


UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52


def leader_client(bootstrap: str, topic: str) -> RawClient:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    broker = md.brokers[md.topics[topic].partitions[0].leader]
    return RawClient(broker.host, broker.port, client_id=AS_NODE)  # it writes markers


def markers(
    client: RawClient,
    topic: str,
    pid: int,
    commit: bool,
    *,
    epoch: int = 0,
    coordinator_epoch: int = 0,
    partitions: tuple[int, ...] = (0,),
) -> dict[int, int]:
    r = client.request(
        27,
        1,
        markers=[
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "coordinator_epoch": coordinator_epoch,
                "topics": [{"name": topic, "partition_indexes": list(partitions)}],
            }
        ],
    )
    (marker,) = r.markers
    assert marker.producer_id == pid
    (t,) = marker.topics
    assert t.name == topic
    return {p.partition_index: p.error_code.value for p in t.partitions}


def produce_txn(client: RawClient, topic: str, pid: int, epoch: int, seq: int, values: list[bytes]):
    batch = encode_batch(
        values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    # A transactional batch comes with its transactional id (as Kafka requires); with
    # verification off no coordinator is asked about these hand-made producer ids.
    r = client.produce(topic, 0, batch, transactional_id=f"raw-{pid}")
    assert r.error_code == 0, r
    return r.base_offset


def produce_plain(client: RawClient, topic: str, values: list[bytes]) -> int:
    r = client.produce(topic, 0, encode_batch(values))
    assert r.error_code == 0, r
    return r.base_offset


def fetch(client: RawClient, topic: str, offset: int, isolation: int, max_wait_ms: int = 0) -> Any:
    r = client.request(
        1,
        11,
        replica_id=-1,
        max_wait=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return r.responses[0].partitions[0]


def consume_values(bootstrap: str, topic: str, isolation: str, until_offset: int) -> list[bytes]:
    """Everything the consumer returns until its position reaches ``until_offset``, then
    one more poll to catch anything it should not have returned."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    tp = TopicPartition(topic, 0, 0)
    consumer.assign([tp])
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg.value())
                continue
            (pos,) = consumer.position([TopicPartition(topic, 0)])
            if pos.offset >= until_offset:
                break
        else:
            raise AssertionError(f"{isolation} consumer stuck before {until_offset}: {out}")
        for _ in range(5):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def test_markers_control_what_read_committed_sees(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, 1)
    client = leader_client(bootstrap, topic_name)
    try:
        p_abort, _ = client.init_producer_id()
        p_commit, _ = client.init_producer_id()
        p_open, _ = client.init_producer_id()
        a = produce_txn(client, topic_name, p_abort, 0, 0, [b"a1", b"a2"])
        produce_txn(client, topic_name, p_commit, 0, 0, [b"c1"])
        produce_plain(client, topic_name, [b"n0"])
        produce_txn(client, topic_name, p_abort, 0, 2, [b"a3"])
        produce_txn(client, topic_name, p_commit, 0, 1, [b"c2"])
        assert markers(client, topic_name, p_abort, False) == {0: 0}
        assert markers(client, topic_name, p_commit, True) == {0: 0}
        produce_plain(client, topic_name, [b"n1"])
        lso = produce_txn(client, topic_name, p_open, 0, 0, [b"open1"])
        produce_plain(client, topic_name, [b"n2"])
        hw = client.latest_offset(topic_name, 0)
        assert client.latest_offset(topic_name, 0, isolation=1) == lso

        raw = fetch(client, topic_name, 0, isolation=1)
        assert raw.error_code.value == 0
        assert (raw.high_watermark, raw.last_stable_offset) == (hw, lso)
        assert [(t.producer_id, t.first_offset) for t in raw.aborted_transactions] == [(p_abort, a)]
        assert fetch(client, topic_name, 0, isolation=0).aborted_transactions is None

        committed = consume_values(bootstrap, topic_name, "read_committed", lso)
        assert committed == [b"c1", b"n0", b"c2", b"n1"]
        uncommitted = consume_values(bootstrap, topic_name, "read_uncommitted", hw)
        assert uncommitted == [b"a1", b"a2", b"c1", b"n0", b"a3", b"c2", b"n1", b"open1", b"n2"]

        # a long-polling read_committed fetch at the LSO wakes when the marker lands
        waiter = leader_client(bootstrap, topic_name)
        got: dict[str, Any] = {}

        def long_poll() -> None:
            start = time.monotonic()
            got["response"] = fetch(waiter, topic_name, lso, isolation=1, max_wait_ms=30_000)
            got["elapsed"] = time.monotonic() - start

        thread = threading.Thread(target=long_poll)
        thread.start()
        try:
            time.sleep(0.5)  # let the fetch park (the assertion below does not rely on it)
            assert markers(client, topic_name, p_open, True) == {0: 0}
            thread.join(60)
            assert not thread.is_alive()
        finally:
            waiter.close()
        assert got["elapsed"] < 20, got  # woken by the marker, not by max_wait
        assert got["response"].records
        assert got["response"].last_stable_offset == hw + 1
        end = client.latest_offset(topic_name, 0)
        committed = consume_values(bootstrap, topic_name, "read_committed", end)
        assert committed == [b"c1", b"n0", b"c2", b"n1", b"open1", b"n2"]
    finally:
        client.close()


def test_marker_errors(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, 1)
    client = leader_client(bootstrap, topic_name)
    try:
        pid, _ = client.init_producer_id()
        produce_txn(client, topic_name, pid, 0, 0, [b"x"])
        produce_txn(client, topic_name, pid, 1, 0, [b"y"])  # epoch bump
        assert markers(client, topic_name, pid, False, epoch=0) == {0: INVALID_PRODUCER_EPOCH}
        assert markers(client, topic_name, pid, False, epoch=1, coordinator_epoch=3) == {0: 0}
        produce_txn(client, topic_name, pid, 1, 1, [b"z"])
        fenced = markers(client, topic_name, pid, True, epoch=1, coordinator_epoch=2)
        assert fenced == {0: TRANSACTION_COORDINATOR_FENCED}
        both = markers(
            client, topic_name, pid, True, epoch=1, coordinator_epoch=3, partitions=(0, 7)
        )
        assert both == {0: 0, 7: UNKNOWN_TOPIC_OR_PARTITION}
        assert markers(client, "no-such-topic-xyz", pid, True) == {0: UNKNOWN_TOPIC_OR_PARTITION}
    finally:
        client.close()
    # Offsets markers belong to the group coordinator: a broker without the coordinator
    # role (node 2 of the shared cluster) is not the leader of __consumer_offsets.
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    broker_only = RawClient(md.brokers[2].host, md.brokers[2].port, client_id=AS_NODE)
    try:
        assert markers(broker_only, "__consumer_offsets", pid, True) == {0: NOT_LEADER_OR_FOLLOWER}
    finally:
        broker_only.close()
