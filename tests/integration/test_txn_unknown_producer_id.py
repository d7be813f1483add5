"""KIP-360 end to end with an unmodified confluent-kafka (librdkafka) transactional
producer against a real node:

* DeleteRecords removes the producer's records, not its state: the next transaction
  goes on without an error (prolonged producer-state retention; on the shared cluster,
  whose producer.id.expiration.ms is a day);
* once ``producer.id.expiration.ms`` has dropped the state, the next write (a non-zero
  sequence) gets UNKNOWN_PRODUCER_ID (the cluster runs Kafka <= 2.4's rule, the bug switch
  ``txnchaos.bug.unknown.producer.strict``: Kafka >= 2.5 accepts the write, see the
  conformance probe kip360.idempotent-first-sequence); the transaction is abortable, the producer
  re-initialises with InitProducerId carrying its producer id and epoch (v3+), the
  coordinator bumps the epoch of the same producer id, and the producer goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from txnchaos.harness.launch.local import LocalCluster

from ..conftest import start_cluster
from .raw_client import RawClient, address
from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration

TOPIC = "kip360"
TXN_ID = "kip360-producer"


def wait_until(condition: Callable[[], bool], what: str, attempts: int = 300) -> None:
    """Poll a condition (bounded: ~30 s); no timing is asserted."""
    for _ in range(attempts):
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = start_cluster(
        tmp_path / "cluster",
        brokers=1,
        settings=[
            "producer.id.expiration.ms=1000",
            "log.retention.check.interval.ms=100",
            "txnchaos.bug.unknown.producer.strict=true",
        ],
    )
    create_topic(cluster.state()["bootstrap"], TOPIC, 1)
    yield cluster
    cluster.down()


def active_producers(client: RawClient, topic: str = TOPIC) -> dict[int, int]:
    """DescribeProducers of the partition: producer id -> epoch."""
    r = client.request(61, 0, topics=[{"name": topic, "partition_indexes": [0]}])
    partition = r.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return {p.producer_id: p.producer_epoch for p in partition.active_producers}


def coordinator_identity(client: RawClient, txn_id: str = TXN_ID) -> tuple[int, int]:
    """DescribeTransactions of the producer's transactional id: (producer id, epoch).
    (Not while the id is Empty: kio cannot decode its start time of -1.)"""
    r = client.request(65, 0, transactional_ids=[txn_id])
    state = r.transaction_states[0]
    assert state.error_code == 0, state
    return state.producer_id, state.producer_epoch


def committed_from(bootstrap: str, topic: str, start: int, end: int) -> list[bytes]:
    """What a read_committed consumer returns from ``start`` until its position reaches
    ``end`` (the log starts at ``start`` after DeleteRecords)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    out: list[bytes] = []
    try:
        for _ in range(300):  # bounded (~60 s)
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg.value())
                continue
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= end:
                return out
        raise AssertionError(f"read_committed consumer stuck before {end}: {out}")
    finally:
        consumer.close()


def one_transaction(producer: Producer, *values: bytes, topic: str = TOPIC) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=0)
    producer.commit_transaction(30)


def leader_client(bootstrap: str, topic: str) -> RawClient:
    """A raw connection to the leader of ``topic``'s partition 0 (the shared cluster has two
    brokers: partition requests sent elsewhere get NOT_LEADER_OR_FOLLOWER)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=30)
    broker = meta.brokers[meta.topics[topic].partitions[0].leader]
    return RawClient(broker.host, broker.port)


def test_delete_records_keeps_the_producer_state(bootstrap: str, topic_name: str) -> None:
    """DeleteRecords drops the records but not the producer's state (KIP-360): the
    producer's next transaction goes on without an error."""
    create_topic(bootstrap, topic_name, 1)
    client = RawClient(*address(bootstrap))
    leader = leader_client(bootstrap, topic_name)
    txn_id = f"kip360-{topic_name}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    try:
        producer.init_transactions(30)
        one_transaction(producer, b"t1-a", b"t1-b", topic=topic_name)
        pid, epoch = coordinator_identity(client, txn_id)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        end = leader.latest_offset(topic_name, 0)
        done = admin.delete_records([TopicPartition(topic_name, 0, end)])
        assert done[TopicPartition(topic_name, 0, end)].result(10).low_watermark == end
        assert active_producers(leader, topic_name) == {pid: epoch}
        one_transaction(producer, b"t2", topic=topic_name)  # sequence 2: no error
        assert coordinator_identity(client, txn_id) == (pid, epoch)
        final = leader.latest_offset(topic_name, 0)
        assert committed_from(bootstrap, topic_name, end, final) == [b"t2"]
    finally:
        producer.flush(10)
        client.close()
        leader.close()


def test_unknown_producer_id_is_abortable_and_bumps_the_epoch(cluster: LocalCluster) -> None:
    """producer.id.expiration.ms drops an idle producer's state: its next write gets
    UNKNOWN_PRODUCER_ID, the transaction aborts, librdkafka bumps the epoch with
    InitProducerId(pid, epoch) and goes on."""
    bootstrap = cluster.state()["bootstrap"]
    client = RawClient(*address(bootstrap))
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": TXN_ID, "linger.ms": 0}
    )
    try:
        producer.init_transactions(30)
        one_transaction(producer, b"t1-a", b"t1-b")
        pid, epoch = coordinator_identity(client)
        start = client.latest_offset(TOPIC, 0)
        wait_until(lambda: pid not in active_producers(client), "the producer state to expire")
        producer.begin_transaction()
        delivery: list[KafkaError] = []
        producer.produce(
            TOPIC, b"t2-lost", partition=0, on_delivery=lambda err, _msg: delivery.append(err)
        )
        with pytest.raises(KafkaException) as failed:
            producer.commit_transaction(30)
        assert failed.value.args[0].txn_requires_abort(), failed.value
        producer.poll(0)
        assert [e.code() for e in delivery] == [KafkaError.UNKNOWN_PRODUCER_ID], delivery
        producer.abort_transaction(30)
        one_transaction(producer, b"t3")
        # librdkafka re-initialised with InitProducerId(pid, epoch): a KIP-360 bump of
        # the same producer id, not a new producer; t3 was written with it.
        assert coordinator_identity(client) == (pid, epoch + 1)
        assert active_producers(client) == {pid: epoch + 1}
        end = client.latest_offset(TOPIC, 0)
        assert committed_from(bootstrap, TOPIC, start, end) == [b"t3"]
    finally:
        producer.flush(10)
        client.close()
