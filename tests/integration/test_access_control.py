"""SASL/PLAIN listeners and ACLs on real nodes, with confluent-kafka configured for
SASL_PLAINTEXT: a wrong password is refused; the authorization matrix (principal
permissions x operation) gets Kafka's error and writes nothing; the nodes, which
authenticate to each other, still run transactions end to end."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.harness.workload.conftest import run_workload
from tests.harness.workload.helpers import happened
from txnchaos.cluster.net.client import PeerUnavailable
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import decode_response, encode_request, request_class
from txnchaos.cluster.security.metrics import PREFIX as AUTH_METRICS
from txnchaos.cluster.security.sasl import SaslCredentials
from txnchaos.harness.capture.final_state import capture_final_state
from txnchaos.harness.client_security import security_config
from txnchaos.harness.clients import FatalError, ProducerConfig
from txnchaos.harness.clients import Producer as OurProducer
from txnchaos.harness.launch.local import LocalCluster
from txnchaos.harness.workload.final_read import final_read
from txnchaos.jobs.cli import main as txnchaos

from ..conftest import start_cluster
from .raw_client import AS_NODE, RawClient

pytestmark = pytest.mark.integration

PASSWORDS = {"node": "node-pw", "admin": "admin-pw", "alice": "alice-pw"}
PASSWORDS.update({u: f"{u}-pw" for u in ("notxn", "notopic", "nogroup")})
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    ['username="node" password="node-pw"', *(f'user_{u}="{p}"' for u, p in PASSWORDS.items())]
)
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_TXN_STATE = 48
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SASL_AUTHENTICATION_FAILED = 58
TXN, TOPIC, GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
PREFIXED = ResourcePatternType.PREFIXED
WRITE, READ, ALL = AclOperation.WRITE, AclOperation.READ, AclOperation.ALL


def grant(user: str, rtype: ResourceType, prefix: str, op: AclOperation) -> AclBinding:
    return AclBinding(rtype, prefix, PREFIXED, f"User:{user}", "*", op, AclPermissionType.ALLOW)


# Each user lacks one permission of a transactional copy: alice has them all.
GRANTS = [
    *(grant(u, TOPIC, "acl-", ALL) for u in ("alice", "notxn", "nogroup")),
    *(grant(u, TXN, f"{u}-", WRITE) for u in ("alice", "notopic", "nogroup")),
    *(grant(u, GROUP, f"{u}-", READ) for u in ("alice", "notxn", "notopic")),
    # an operator's abort (KIP-664) needs ALTER on the cluster, as in Kafka 4.x
    AclBinding(
        ResourceType.BROKER,
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:notopic",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    ),
]
TWO_PHASE_COMMIT = 15  # KIP-939; confluent-kafka has no enum member for it yet
COORDINATOR = 1001  # the coordinator node (and controller): every transactional id's


def client_config(
    bootstrap: str, user: str, password: str | None = None, mechanism: str = "PLAIN"
) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user] if password is None else password,
    }


def raw(cluster: LocalCluster, node_id: int, user: str, client_id: str = "acl-test") -> RawClient:
    port = next(n["port"] for n in cluster.state()["nodes"] if n["id"] == node_id)
    return RawClient("127.0.0.1", port, client_id, SaslCredentials("PLAIN", user, PASSWORDS[user]))


def eventually(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def every_node_sees(cluster: LocalCluster, count: int) -> bool:
    """Each node's own ACL copy (DescribeAcls answers from it) holds ``count`` ACLs."""
    for node in cluster.state()["nodes"]:
        client = raw(cluster, node["id"], "admin")
        try:
            answer = client.request(
                29,
                3,
                resource_type_filter=1,
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            )
        finally:
            client.close()
        if sum(len(r.acls) for r in answer.resources) != count:
            return False
    return True


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two brokers and a coordinator node, SASL_PLAINTEXT with ACLs; admin is a super user."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("sasl-cluster"),
        brokers=2,
        coordinators=1,
        settings=[
            "listener.security.protocol=SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            f"sasl.jaas.config={JAAS};",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
            "transaction.two.phase.commit.enable=true",
        ],
    )
    try:
        admin = AdminClient(client_config(cluster.state()["bootstrap"], "admin"))
        for future in admin.create_acls(GRANTS).values():
            future.result(30)
        # TWO_PHASE_COMMIT through the protocol: the admin client cannot name it
        client = raw(cluster, 1, "admin")
        created = client.request(
            30,
            3,
            creations=[
                {
                    "resource_type": TXN.value,
                    "resource_name": "alice-2pc",
                    "resource_pattern_type": 3,
                    "principal": "User:alice",
                    "host": "*",
                    "operation": TWO_PHASE_COMMIT,
                    "permission_type": 3,
                }
            ],
        )
        client.close()
        assert [r.error_code for r in created.results] == [0]
        eventually(lambda: every_node_sees(cluster, len(GRANTS) + 1), "ACLs on every node")
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def topic(sasl_cluster: LocalCluster) -> str:
    name = f"acl-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(client_config(sasl_cluster.state()["bootstrap"], "admin"))
    for future in admin.create_topics([NewTopic(name, 2, 1)]).values():
        future.result(30)
    return name


def end_offsets(bootstrap: str, topic: str) -> list[int]:
    """What the partitions hold (read_uncommitted high watermarks), seen by the admin."""
    consumer = Consumer({**client_config(bootstrap, "admin"), "group.id": "admin-watch"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in (0, 1)]
    finally:
        consumer.close()


# -- the operations of the matrix: each returns the error code it met (0: none) -----------
def transactional_copy(cluster: LocalCluster, user: str, topic: str) -> int:
    """A transactional produce and commit, as ``user``, with its transactional id."""
    bootstrap = cluster.state()["bootstrap"]
    seen: list[int] = []

    def delivered(err: KafkaError | None, _: Any) -> None:
        if err is not None:
            seen.append(err.code())

    producer = Producer(
        {
            **client_config(bootstrap, user),
            "transactional.id": f"{user}-{topic}",
            "message.timeout.ms": 10_000,
            "transaction.timeout.ms": 10_000,
        }
    )
    try:
        producer.init_transactions(20)
        producer.begin_transaction()
        for p in (0, 1):
            producer.produce(topic, b"v", partition=p, on_delivery=delivered)
        producer.flush(20)
        producer.commit_transaction(20)
    except KafkaException as exc:
        seen.append(exc.args[0].code())
    return seen[0] if seen else 0


def committed_read(cluster: LocalCluster, user: str, topic: str, mechanism: str = "PLAIN") -> int:
    """A read_committed consumer in ``user``'s group, subscribed to ``topic``."""
    bootstrap = cluster.state()["bootstrap"]
    consumer = Consumer(
        {
            **client_config(bootstrap, user, mechanism=mechanism),
            "group.id": f"{user}-{topic}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return int(message.error().code())
            consumer.commit(message, asynchronous=False)
            return 0
        raise AssertionError(f"{user} read nothing from {topic}")
    finally:
        consumer.close()


def describe_transactions(cluster: LocalCluster, user: str, topic: str) -> int:
    client = raw(cluster, COORDINATOR, user)
    try:
        answer = client.request(65, 0, transactional_ids=[f"{user}-{topic}"])
    finally:
        client.close()
    code = int(answer.transaction_states[0].error_code)
    return 0 if code == 105 else code  # TRANSACTIONAL_ID_NOT_FOUND: allowed to ask


def admin_abort(cluster: LocalCluster, user: str, topic: str) -> int:
    """WriteTxnMarkers v1 (KIP-664's admin abort: coordinator epoch -1) sent by a client."""
    client = raw(cluster, 1, user)
    try:
        answer = client.request(
            27,
            1,
            markers=[
                {
                    "producer_id": 5,
                    "producer_epoch": 0,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [0, 1]}],
                    "coordinator_epoch": -1,
                }
            ],
        )
    finally:
        client.close()
    return int(answer.markers[0].topics[0].partitions[0].error_code)


def verify_only(cluster: LocalCluster, user: str, topic: str) -> int:
    """AddPartitionsToTxn v4 (a broker's verification) sent by a client."""
    client = raw(cluster, COORDINATOR, user, client_id=AS_NODE)
    try:
        answer = client.request(
            24,
            4,
            transactions=[
                {
                    "transactional_id": f"{user}-{topic}",
                    "producer_id": 5,
                    "producer_epoch": 0,
                    "verify_only": True,
                    "topics": [{"name": topic, "partitions": [0]}],
                }
            ],
        )
    finally:
        client.close()
    return int(answer.error_code)


def two_phase_init(cluster: LocalCluster, user: str, topic: str) -> int:
    """InitProducerId v6 with Enable2Pc (KIP-939) for ``<user>-2pc``."""
    client = raw(cluster, COORDINATOR, user)
    try:
        answer = client.request(
            22,
            6,
            transactional_id=f"{user}-2pc",
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
            enable2_pc=True,
            keep_prepared_txn=False,
        )
    finally:
        client.close()
    return int(answer.error_code)


OPERATIONS = {
    "transactional_copy": transactional_copy,
    "committed_read": committed_read,
    "describe_transactions": describe_transactions,
    "admin_abort": admin_abort,
    "verify_only": verify_only,
    "two_phase_init": two_phase_init,
}
MATRIX = [
    ("transactional_copy", "notxn", TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("transactional_copy", "notopic", TOPIC_AUTHORIZATION_FAILED),
    ("committed_read", "nogroup", GROUP_AUTHORIZATION_FAILED),
    ("committed_read", "notopic", TOPIC_AUTHORIZATION_FAILED),
    ("describe_transactions", "notxn", TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("describe_transactions", "alice", 0),
    ("admin_abort", "alice", CLUSTER_AUTHORIZATION_FAILED),
    ("admin_abort", "notopic", INVALID_TXN_STATE),  # ALTER: allowed; producer 5 has no txn
    ("verify_only", "alice", CLUSTER_AUTHORIZATION_FAILED),
    ("two_phase_init", "nogroup", TRANSACTIONAL_ID_AUTHORIZATION_FAILED),  # WRITE, no 2PC
    ("two_phase_init", "alice", 0),
]


@pytest.mark.parametrize(("operation", "user", "expected"), MATRIX)
def test_authorization_matrix(
    sasl_cluster: LocalCluster, topic: str, operation: str, user: str, expected: int
) -> None:
    bootstrap = sasl_cluster.state()["bootstrap"]
    before = end_offsets(bootstrap, topic)
    assert OPERATIONS[operation](sasl_cluster, user, topic) == expected
    if expected:
        assert end_offsets(bootstrap, topic) == before  # nothing was written


def test_nodes_run_transactions_end_to_end_with_sasl_on(
    sasl_cluster: LocalCluster, topic: str
) -> None:
    """alice's transactional copy crosses both brokers and the coordinator node (markers,
    verification: node-to-node requests, authenticated), then her read_committed
    consumer in her group (logged in with SCRAM-SHA-512) reads it."""
    assert transactional_copy(sasl_cluster, "alice", topic) == 0
    assert committed_read(sasl_cluster, "alice", topic, mechanism="SCRAM-SHA-512") == 0
    assert sum(end_offsets(sasl_cluster.state()["bootstrap"], topic)) == 4  # 2 records, 2 markers


def test_a_wrong_password_is_refused(sasl_cluster: LocalCluster) -> None:
    errors: list[KafkaError] = []
    config = client_config(sasl_cluster.state()["bootstrap"], "alice", "not-her-password")
    admin = AdminClient({**config, "error_cb": errors.append})
    eventually(
        lambda: (
            admin.poll(0.1) is not None
            and any(e.code() == KafkaError._AUTHENTICATION for e in errors)
        ),
        "an authentication error",
    )
    client = raw(sasl_cluster, 1, "alice")
    client.conn.sasl = SaslCredentials("PLAIN", "alice", "not-her-password")
    try:
        with pytest.raises(PeerUnavailable, match="Invalid username or password"):
            client.request(3, 12, topics=None, allow_auto_topic_creation=False)
    finally:
        client.close()
    metrics_port = next(n["metrics_port"] for n in sasl_cluster.state()["nodes"] if n["id"] == 1)
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        text = page.read().decode()
    failed = [
        line
        for line in text.splitlines()
        if line.startswith(f"{AUTH_METRICS}failed_authentication_total")
    ]
    assert failed and float(failed[0].split()[-1]) >= 1


def test_a_client_that_does_not_authenticate_is_disconnected(sasl_cluster: LocalCluster) -> None:
    port = next(n["port"] for n in sasl_cluster.state()["nodes"] if n["id"] == 1)
    client = RawClient("127.0.0.1", port)
    try:
        assert (
            client.request(18, 3, client_software_name="t", client_software_version="1").error_code
            == 0
        )
        with pytest.raises(PeerUnavailable):
            client.request(3, 12, topics=None, allow_auto_topic_creation=False)
    finally:
        client.close()


def _frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL) if size else b""


@pytest.mark.parametrize(("password", "accepted"), [("alice-pw", True), ("wrong", False)])
def test_handshake_v0_takes_bare_tokens(
    sasl_cluster: LocalCluster, password: str, accepted: bool
) -> None:
    """SaslHandshake v0: the token goes as a bare frame; a refused one closes the connection."""
    port = next(n["port"] for n in sasl_cluster.state()["nodes"] if n["id"] == 1)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(1, make(request_class(17, 0), mechanism="PLAIN"), "v0"))
        assert decode_response(17, 0, _frame(sock))[1].error_code == 0
        token = b"\0alice\0" + password.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        if not accepted:
            assert sock.recv(4) == b""  # closed without an answer
            return
        assert _frame(sock) == b""
        metadata = make(request_class(3, 12), topics=None, allow_auto_topic_creation=False)
        sock.sendall(encode_request(2, metadata, "v0"))
        assert decode_response(3, 12, _frame(sock))[1].brokers


def _both_producers_committed(run: Path) -> bool:
    return happened(run, "commit", "txn-producer") and happened(run, "commit", "tv2-producer")


def test_a_workload_and_the_harness_clients_authenticate_with_the_scenarios_keys(
    sasl_cluster: LocalCluster, tmp_path: Path
) -> None:
    """The workload's ``client_config`` carries the SASL keys: its users (on confluent-kafka
    and on our own client), its topic set-up, the final read and the final-state capture
    (kafka-python) all authenticate."""
    bootstrap = sasl_cluster.state()["bootstrap"]
    name = f"acl-wl-{uuid.uuid4().hex[:8]}"
    keys = {k: v for k, v in client_config(bootstrap, "admin").items() if k != "bootstrap.servers"}
    config = {
        "topics": [{"name": name, "partitions": 2}],
        "client_config": keys,
        "users": [
            {"kind": "transactional_producer", "topics": [name], "count": 1},
            {"kind": "tv2_producer", "topics": [name], "count": 1},
        ],
    }
    run = tmp_path / "run"
    stats = run_workload(config, run, bootstrap, 2, timeout_s=240, until=_both_producers_committed)
    by_name = stats["by_name"]  # (sends purged by the workload's aborts count as failures)
    for kind in ("txn", "tv2"):
        assert by_name[f"{kind}/init"]["failures"] == by_name[f"{kind}/commit"]["failures"] == 0
        assert by_name[f"{kind}/commit"]["requests"] > 0, by_name
    security = security_config({**keys, "socket.timeout.ms": 1000})
    assert security == keys
    result = final_read(bootstrap, {name: 2}, run, timeout_s=30, client_config=security)
    assert result.complete and result.records > 0
    state = capture_final_state(run, bootstrap, result.partition_state(), security)
    assert state["coordinator_transactions"] == []  # answered: kafka-python authenticated


# -- the harness's own protocol clients: our producer and `txnchaos transactions` ----------
def our_transaction(bootstrap: str, user: str, topic: str, password: str | None = None) -> int:
    """A TV2 transaction (one record per partition, committed) by our producer, logged in
    as ``user`` with SCRAM-SHA-512; the fatal error's code if it fails (0: committed)."""
    config = ProducerConfig(
        bootstrap,
        client_id="acl-ours",
        transactional_id=f"{user}-{topic}",
        transaction_timeout_ms=10_000,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=user,
        sasl_password=PASSWORDS[user] if password is None else password,
    )

    async def go() -> int:
        producer = OurProducer(config)
        try:
            await producer.init_transactions(20)
            await producer.begin_transaction()
            assert producer.transaction_version == 2
            sent = [producer.send(topic, p, b"v") for p in (0, 1)]
            await producer.commit_transaction(20)
            assert all(f.result().offset >= 0 for f in sent)
            return 0
        except FatalError as exc:
            assert exc.code is not None, exc
            return exc.code
        finally:
            await producer.close()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("user", "password", "expected"),
    [
        ("alice", None, 0),
        ("notxn", None, TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ("alice", "not-her-password", SASL_AUTHENTICATION_FAILED),
    ],
)
def test_our_producer_logs_in_and_is_authorized_by_acls(
    sasl_cluster: LocalCluster, topic: str, user: str, password: str | None, expected: int
) -> None:
    """alice commits a TV2 transaction; notxn (no WRITE on her transactional id) gets
    Kafka's authorization error; a wrong password is refused at login. Both are fatal."""
    bootstrap = sasl_cluster.state()["bootstrap"]
    assert our_transaction(bootstrap, user, topic, password) == expected
    assert sum(end_offsets(bootstrap, topic)) == (4 if expected == 0 else 0)  # 2 records, 2 markers


def test_the_transactions_tool_logs_in_with_a_command_config(
    sasl_cluster: LocalCluster, topic: str, tmp_path: Path
) -> None:
    """``--command-config`` as Kafka's tools take it: admin's JAAS line lists alice's
    transaction; librdkafka-style keys with a wrong password exit 2 naming the refusal."""
    bootstrap = sasl_cluster.state()["bootstrap"]
    assert transactional_copy(sasl_cluster, "alice", topic) == 0
    good = tmp_path / "admin.properties"
    good.write_text(
        "# as for kafka-transactions.sh\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="admin" password="admin-pw";\n'
    )
    listed = CliRunner().invoke(
        txnchaos,
        ["transactions", "list", "--bootstrap", bootstrap, "--command-config", str(good), "--json"],
    )
    assert listed.exit_code == 0, listed.output
    assert f"alice-{topic}" in {t["transactional_id"] for t in json.loads(listed.stdout)}
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=admin\nsasl.password=not-the-password\n"
    )
    refused = CliRunner().invoke(
        txnchaos, ["transactions", "list", "--bootstrap", bootstrap, "--command-config", str(wrong)]
    )
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1
    assert "SASL authentication" in refused.stderr and "Invalid user credentials" in refused.stderr


def test_cluster_features_logs_in_with_a_command_config(
    sasl_cluster: LocalCluster, tmp_path: Path
) -> None:
    """``cluster features --command-config``: the super user may change transaction.version
    (validate-only here), alice is refused it by the ACLs, no credentials get a clear error."""

    def features(*extra: str) -> Any:
        args = ["cluster", "features", "--data-dir", str(sasl_cluster.data_dir), *extra]
        return CliRunner().invoke(txnchaos, args)

    def login(user: str) -> str:
        path = tmp_path / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.username={user}\nsasl.password={PASSWORDS[user]}\n"
        )
        return str(path)

    shown = features("--command-config", login("admin"))
    assert shown.exit_code == 0, shown.output
    level = json.loads(shown.stdout)["features"]["transaction.version"]["finalized"]
    change = ("--set", f"transaction.version={level}", "--validate-only")
    assert features("--command-config", login("admin"), *change).exit_code == 0
    refused = features("--command-config", login("alice"), *change)
    assert refused.exit_code == 2 and "update refused" in refused.stderr, refused.output
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    anonymous = features(*change)
    assert anonymous.exit_code == 2, anonymous.output
    assert anonymous.stderr.count("\n") == 1, anonymous.stderr
    assert "--command-config" in anonymous.stderr


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    client = raw(cluster, 1, "admin")
    try:
        answer = client.request(
            3,
            12,
            topics=[{"name": topic, "topic_id": None}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    finally:
        client.close()
    return next(p.leader_id for p in answer.topics[0].partitions if p.partition_index == partition)


def raw_produce(client: RawClient, tid: str | None, topic: str, batch: bytes) -> Any:
    answer = client.request(
        0,
        10,
        transactional_id=tid,
        acks=-1,
        timeout=10000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    )
    return answer.responses[0].partition_responses[0]


def test_a_batch_cannot_join_another_principals_transaction(
    sasl_cluster: LocalCluster, topic: str
) -> None:
    """Issue 35 item 3: alice's producer id and epoch are public (DescribeProducers); a
    principal with topic WRITE sending a transactional batch with them, without a
    transactional id or with one of its own, had it committed in alice's transaction."""
    from txnchaos.cluster.protocol.records import encode_batch

    coordinator = raw(sasl_cluster, COORDINATOR, "alice")
    leader = leader_of(sasl_cluster, topic, 0)
    alice = raw(sasl_cluster, leader, "alice")
    intruders = [raw(sasl_cluster, leader, u) for u in ("notxn", "nogroup")]
    try:
        init = coordinator.request(
            22,
            4,
            transactional_id="alice-victim",
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        pid, epoch = init.producer_id, init.producer_epoch
        added = coordinator.request(
            24,
            3,
            v3_and_below_transactional_id="alice-victim",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[{"name": topic, "partitions": [0]}],
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )

        def batch(seq: int, value: bytes) -> bytes:
            return encode_batch(
                [value],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                transactional=True,
            )

        assert raw_produce(alice, "alice-victim", topic, batch(0, b"alice")).error_code == 0
        # no transactional id: Kafka refuses the whole request
        refused = raw_produce(intruders[0], None, topic, batch(1, b"intruder"))
        assert refused.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED, refused
        # its own transactional id (WRITE on nogroup-*), alice's producer id
        refused = raw_produce(intruders[1], "nogroup-own", topic, batch(1, b"intruder"))
        assert refused.error_code == 49, refused  # INVALID_PRODUCER_ID_MAPPING
        assert alice.latest_offset(topic, 0) == 1  # only alice's record is in the log
        assert raw_produce(alice, "alice-victim", topic, batch(1, b"alice-2")).error_code == 0
    finally:
        for c in (coordinator, alice, *intruders):
            c.close()
