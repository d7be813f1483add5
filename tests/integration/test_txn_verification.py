"""KIP-890 part 1 against real nodes: the broker verifies with the coordinator
(AddPartitionsToTxn v4 VerifyOnly) before the first transactional write of a
transaction to a partition.

Raw requests play an old client that misbehaves (writes to a partition it never
added, or writes after its transaction was aborted); confluent-kafka plays a
well-behaved old client whose transactions must work as before.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.local import LocalCluster

from ..conftest import start_cluster
from .raw_client import AS_NODE, RawClient, address
from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration

NOT_ENOUGH_REPLICAS = 19
UNSUPPORTED_VERSION = 35
INVALID_TXN_STATE = 48
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
TRANSACTION_ABORTABLE = 120
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC = "verified"


def cluster_with(root: Path, *settings: str) -> LocalCluster:
    """Node 1: broker and coordinator (hosts the controller); node 2: broker only."""
    cluster = start_cluster(root, brokers=2, settings=list(settings))
    create_topic(cluster.state()["bootstrap"], TOPIC, 2)
    return cluster


@pytest.fixture
def clients(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RawClient]:
    cluster = cluster_with(tmp_path / "c", *request.param)
    client = RawClient(*address(cluster.state()["bootstrap"]))
    try:
        yield client
    finally:
        client.close()
        cluster.down()


def init_transactional(client: RawClient, txn_id: str) -> tuple[int, int]:
    r = client.request(
        22, 1, transactional_id=txn_id, transaction_timeout=60_000
    )  # InitProducerId v1: an old client
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def add_partition(client: RawClient, txn_id: str, pid: int, epoch: int, partition: int) -> None:
    r = client.request(
        24,
        3,
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": [partition]}],
    )
    codes = [
        p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    assert codes == [0], r


def end_txn(client: RawClient, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    r = client.request(
        26, 3, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    return int(r.error_code)


def produce_txn(
    client: RawClient, txn_id: str, pid: int, epoch: int, seq: int, partition: int
) -> tuple[int, str | None]:
    """A transactional Produce v10 (librdkafka's version) to the partition's leader."""
    leader = leader_of(client, partition)
    batch = encode_batch(
        [b"x%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    r = leader.request(
        0,
        10,
        transactional_id=txn_id,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
    )
    if leader is not client:
        leader.close()
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), p.error_message


def leader_of(client: RawClient, partition: int) -> RawClient:
    md = client.request(
        3,
        12,
        topics=[{"name": TOPIC, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    leader = md.topics[0].partitions[partition].leader_id
    broker = next(b for b in md.brokers if b.node_id == leader)
    if (broker.host, broker.port) == (client.conn.host, client.conn.port):
        return client
    return RawClient(broker.host, broker.port)


@pytest.mark.parametrize(
    "clients",
    [["transaction.version=0"], ["transaction.version=1"], ["transaction.version=2"]],
    indirect=True,
)
def test_write_to_a_partition_never_added_is_refused(clients: RawClient) -> None:
    """The buggy-client case: no AddPartitionsToTxn for partition 1, then a write there.
    Refused at every transaction.version while verification is on (its default): Kafka
    reads transaction.partition.verification.enable, never the feature level."""
    pid, epoch = init_transactional(clients, "buggy")
    add_partition(clients, "buggy", pid, epoch, 0)
    assert produce_txn(clients, "buggy", pid, epoch, 0, 1) == (
        INVALID_TXN_STATE,
        "Partition was not added to the transaction",
    )
    assert produce_txn(clients, "buggy", pid, epoch, 0, 0) == (0, None)  # the added one
    assert end_txn(clients, "buggy", pid, epoch, True) == 0


@pytest.mark.parametrize(
    "clients",
    [["transaction.version=0"], ["transaction.version=1"], ["transaction.version=2"]],
    indirect=True,
)
def test_write_delayed_past_the_abort_is_refused(clients: RawClient) -> None:
    """The late-produce case: the transaction was aborted before its first write to a
    partition arrived; the write must not open a hanging transaction."""
    pid, epoch = init_transactional(clients, "late")
    add_partition(clients, "late", pid, epoch, 1)
    assert end_txn(clients, "late", pid, epoch, False) == 0
    code, _ = produce_txn(clients, "late", pid, epoch, 0, 1)
    for _ in range(100):  # while the abort is being completed: retriable, as a client does
        if code != NOT_ENOUGH_REPLICAS:
            break
        code, _ = produce_txn(clients, "late", pid, epoch, 0, 1)
    assert code == INVALID_TXN_STATE
    leader = leader_of(clients, 1)
    try:  # nothing written, nothing hanging: the abort marker only
        assert leader.latest_offset(TOPIC, 1, isolation=1) == leader.latest_offset(TOPIC, 1) == 1
    finally:
        if leader is not clients:
            leader.close()


@pytest.mark.parametrize(
    "clients",
    [
        ["transaction.version=0", "transaction.partition.verification.enable=false"],
        ["transaction.version=2", "transaction.partition.verification.enable=false"],
    ],
    indirect=True,
)
def test_without_the_defense_the_write_opens_a_hanging_transaction(clients: RawClient) -> None:
    """Verification off (or a release before it, Kafka < 3.6), at any level: the same
    write is accepted and the partition's last stable offset stays behind its (only)
    record: a hanging transaction."""
    pid, epoch = init_transactional(clients, "unguarded")
    add_partition(clients, "unguarded", pid, epoch, 0)
    assert end_txn(clients, "unguarded", pid, epoch, False) == 0
    assert produce_txn(clients, "unguarded", pid, epoch, 0, 1) == (0, None)
    leader = leader_of(clients, 1)
    try:
        assert leader.latest_offset(TOPIC, 1) == 1
        assert leader.latest_offset(TOPIC, 1, isolation=1) == 0  # stuck below the record
    finally:
        if leader is not clients:
            leader.close()


@pytest.mark.parametrize("clients", [["transaction.version=2"]], indirect=True)
def test_broker_verification_is_refused_to_clients(clients: RawClient) -> None:
    pid, epoch = init_transactional(clients, "srv")
    add_partition(clients, "srv", pid, epoch, 0)
    verify = {
        "transactions": [
            {
                "transactional_id": "srv",
                "producer_id": pid,
                "producer_epoch": epoch,
                "verify_only": True,
                "topics": [{"name": TOPIC, "partitions": [0, 1]}],
            }
        ]
    }
    refused = clients.request(24, 4, verify)
    assert int(refused.error_code) == CLUSTER_AUTHORIZATION_FAILED
    assert refused.results_by_transaction == ()
    markers = clients.request(
        27,
        1,
        markers=[
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": False,
                "coordinator_epoch": 0,
                "topics": [{"name": TOPIC, "partition_indexes": [0]}],
            }
        ],
    )
    # WriteTxnMarkers is served to any client without an authorizer, as Kafka serves it
    # (KIP-664's admin abort): partition 0 holds no open transaction of this producer, so
    # the marker is written and completes nothing.
    assert [int(p.error_code) for p in markers.markers[0].topics[0].partitions] == [0]
    node = RawClient(clients.conn.host, clients.conn.port, client_id=AS_NODE)
    try:
        for version, missing in ((4, INVALID_TXN_STATE), (5, TRANSACTION_ABORTABLE)):
            r = node.request(24, version, verify)
            assert int(r.error_code) == 0
            (txn,) = r.results_by_transaction
            codes = {
                p.partition_index: int(p.partition_error_code)
                for t in txn.topic_results
                for p in t.results_by_partition
            }
            assert codes == {0: 0, 1: missing}
    finally:
        node.close()


def coordinator_of(client: RawClient, key: str, key_type: int) -> RawClient:
    r = client.request(10, 3, key=key, key_type=key_type)
    assert int(r.error_code) == 0, r
    return RawClient(r.host, r.port)


def txn_offset_commit(
    client: RawClient, txn_id: str, group: str, pid: int, epoch: int, version: int = 3
) -> int:
    r = client.request(
        28,
        version,
        transactional_id=txn_id,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    return int(r.topics[0].partitions[0].error_code)


@pytest.mark.parametrize("clients", [["transaction.version=1"]], indirect=True)
def test_offsets_of_a_transaction_that_never_added_them_are_refused(clients: RawClient) -> None:
    """TxnOffsetCommit without AddOffsetsToTxn: INVALID_TXN_STATE (the seed's
    TxnOffsetCommit mapping keeps it; it is fatal for old clients)."""
    pid, epoch = init_transactional(clients, "offsets")
    add_partition(clients, "offsets", pid, epoch, 0)
    groups = coordinator_of(clients, "g-offsets", 0)
    try:
        assert txn_offset_commit(groups, "offsets", "g-offsets", pid, epoch) == INVALID_TXN_STATE
        r = clients.request(
            25, 3, transactional_id="offsets", producer_id=pid, producer_epoch=epoch,
            group_id="g-offsets",
        )  # fmt: skip
        assert int(r.error_code) == 0
        assert txn_offset_commit(groups, "offsets", "g-offsets", pid, epoch) == 0
    finally:
        groups.close()


def produce_v12(client: RawClient, txn_id: str, pid: int, epoch: int, seq: int, partition: int):
    leader = leader_of(client, partition)
    batch = encode_batch(
        [b"n%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    try:
        r = leader.request(
            0,
            12,
            transactional_id=txn_id,
            acks=-1,
            timeout=10_000,
            topic_data=[
                {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}
            ],
        )
    finally:
        if leader is not client:
            leader.close()
    return int(r.responses[0].partition_responses[0].error_code)


def described_partitions(client: RawClient, txn_id: str) -> set[tuple[str, int]]:
    r = client.request(65, 0, transactional_ids=[txn_id])
    (state,) = r.transaction_states
    assert int(state.error_code) == 0, state
    return {(t.topic, p) for t in state.topics for p in t.partitions}


@pytest.mark.parametrize("clients", [["transaction.version=2"]], indirect=True)
def test_produce_v12_adds_the_partition_under_tv2(clients: RawClient) -> None:
    """KIP-890 part 2, broker side: no AddPartitionsToTxn, the broker adds the partition;
    a first write that does not start at sequence 0 is refused."""
    pid, epoch = init_transactional(clients, "new-client")
    assert produce_v12(clients, "new-client", pid, epoch, 3, 1) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert txn_state(clients, "new-client") == "Empty"  # nothing was added
    assert produce_v12(clients, "new-client", pid, epoch, 0, 1) == 0
    assert produce_v12(clients, "new-client", pid, epoch, 1, 1) == 0  # ongoing: no round trip
    assert described_partitions(clients, "new-client") == {(TOPIC, 1)}
    groups = coordinator_of(clients, "g-new", 0)
    try:
        assert txn_offset_commit(groups, "new-client", "g-new", pid, epoch, version=5) == 0
    finally:
        groups.close()
    assert any(t == "__consumer_offsets" for t, _ in described_partitions(clients, "new-client"))
    assert end_txn(clients, "new-client", pid, epoch, True) == 0
    for _ in range(2000):  # CompleteCommit once every marker is written
        if txn_state(clients, "new-client") == "CompleteCommit":
            break
    assert txn_state(clients, "new-client") == "CompleteCommit"
    leader = leader_of(clients, 1)
    try:
        assert leader.latest_offset(TOPIC, 1, isolation=1) == 3  # 2 records + the marker
    finally:
        if leader is not clients:
            leader.close()


def txn_state(client: RawClient, txn_id: str) -> str:
    """From ListTransactions (kio cannot read DescribeTransactions' -1 start time)."""
    r = client.request(66, 0, state_filters=[], producer_id_filters=[])
    return next(t.transaction_state for t in r.transaction_states if t.transactional_id == txn_id)


@pytest.mark.parametrize(
    ("clients", "level"),
    [(["transaction.version=0"], 0), (["transaction.version=1"], 1)],
    indirect=["clients"],
)
def test_produce_v12_below_tv2_follows_kafka(clients: RawClient, level: int) -> None:
    """A new client's Produce v12 below TV2, as Kafka 4.4.0 answers it (the request
    version, not the level, decides that the broker adds the partition): at TV1 the
    coordinator adds it and the write goes in; at TV0 the coordinator cannot record a TV2
    client (version-0 state records) and answers UNSUPPORTED_VERSION: nothing written."""
    pid, epoch = init_transactional(clients, "too-new")
    code = produce_v12(clients, "too-new", pid, epoch, 0, 1)
    leader = leader_of(clients, 1)
    try:
        if level == 0:
            assert code == UNSUPPORTED_VERSION
            assert leader.latest_offset(TOPIC, 1) == 0
            assert txn_state(clients, "too-new") == "Empty"
        else:
            assert code == 0
            assert txn_state(clients, "too-new") == "Ongoing"
            assert leader.latest_offset(TOPIC, 1) == 1
    finally:
        if leader is not clients:
            leader.close()


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r"^(kafka_server_addpartitionstotxnmanager_\w+) (\S+)$", text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def test_librdkafka_transactions_pass_verification(tmp_path: Path) -> None:
    """Unmodified confluent-kafka on a TV2 cluster: every first write of a transaction to
    a partition is verified, none fails, and read_committed sees the commits only."""
    cluster = cluster_with(tmp_path / "c")
    bootstrap = cluster.state()["bootstrap"]
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rdk-verified"})
        producer.init_transactions(30)
        for n, commit in enumerate((True, False, True)):
            producer.begin_transaction()
            for partition in (0, 1):
                producer.produce(TOPIC, f"{n}-{partition}".encode(), partition=partition)
            producer.flush(30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "verified-reader",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            }
        )
        consumer.subscribe([TOPIC])
        seen, eof = [], set()
        while len(eof) < 2:
            msg = consumer.poll(10)
            assert msg is not None, "no progress"
            if msg.error():
                eof.add(msg.partition())
                continue
            seen.append(msg.value().decode())
        consumer.close()
        assert sorted(seen) == ["0-0", "0-1", "2-0", "2-1"]
        totals: dict[str, float] = {}
        for node in cluster.state()["nodes"]:
            for name, value in scrape(node["metrics_port"]).items():
                totals[name] = totals.get(name, 0.0) + value
        assert totals["kafka_server_addpartitionstotxnmanager_verificationtimems_count"] == 6
        assert totals["kafka_server_addpartitionstotxnmanager_verificationfailurerate_total"] == 0
    finally:
        cluster.down()
