"""The differences an audit found between our cluster and Apache Kafka (issue 34,
"Differences already found"), each request sent as-is to a Kafka release (4.4.0, the
kafka launcher) and to our cluster, both at transaction.version 0, with the same answer
asserted from both (docs/conformance.md, "Differences fixed"):

* verification of old clients' writes is ``transaction.partition.verification.enable``'s,
  at every level: at TV0 a Produce v11 / TxnOffsetCommit v4 that never added its partition
  is refused (TRANSACTION_ABORTABLE), as at TV1;
* a TV2-only request at TV0 (Produce v12 without AddPartitionsToTxn, TxnOffsetCommit v5,
  EndTxn v5) is refused with UNSUPPORTED_VERSION and writes nothing (Kafka then also
  leaves the id answering CONCURRENT_TRANSACTIONS; ours stays usable, see below);
* ApiVersions v3 leaves transaction.version out of SupportedFeatures (its minimum level
  is 0, KAFKA-17492) while FinalizedFeatures lists it: Kafka does the same;
* DescribeTransactions: no start time (-1) in Empty, the last transaction's in Complete*;
* Kafka's own ``kafka-transactions.sh abort`` (KIP-664) ends an open transaction on both;
* ``txnchaos acls`` manages Kafka's ACLs (StandardAuthorizer) as kafka-acls.sh does.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness.launch.helpers import create_topic
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.base import ClusterSpec
from txnchaos.harness.launch.kafka.launcher import KafkaLauncher
from txnchaos.harness.launch.kafka.release import DEFAULT_VERSION, java_binary
from txnchaos.harness.maven import Artifact, classpath, resolve

from ..conftest import start_cluster
from .raw_client import RawClient, address

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

NONE = 0
UNSUPPORTED_VERSION = 35
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_ABORTABLE = 120
RETRIABLE = {14, 15, 16, CONCURRENT_TRANSACTIONS}  # loading / not available / not coordinator
FLAVOURS = ["apache-kafka", "txnchaos"]
KAFKA_SETTINGS = [
    "transaction.version=0",
    # an authorizer, for txnchaos acls; PLAINTEXT: everyone is User:ANONYMOUS, a super user
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
]


class Side:
    """One cluster at transaction.version 0 and a raw client on its (single) broker."""

    def __init__(self, flavour: str, bootstrap: str) -> None:
        self.flavour = flavour
        self.bootstrap = bootstrap
        self.client = RawClient(*address(bootstrap))

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        return self.client.request(api_key, version, **fields)

    def topic(self) -> str:
        """A new one-partition topic, once its leader serves it."""
        name = create_topic(self.bootstrap, 1)
        for _ in range(200):
            try:
                self.offsets(name)
                return name
            except AssertionError:
                time.sleep(0.1)
        raise AssertionError(f"{name} never got a leader")

    def retried(self, api_key: int, version: int, error: Any, **fields: Any) -> Any:
        """A coordinator request, asked again while the coordinator is not ready."""
        for _ in range(200):
            r = self.request(api_key, version, **fields)
            if int(error(r)) not in RETRIABLE:
                return r
            time.sleep(0.2)
        raise AssertionError(f"no answer to {api_key} v{version}: {r}")

    def init(self, txn_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
        # FindCoordinator first: Kafka creates __transaction_state on the first one
        self.retried(10, 4, lambda r: r.coordinators[0].error_code, key_type=1,
                     coordinator_keys=[txn_id])  # fmt: skip
        r = self.retried(
            22,
            4,
            lambda r: r.error_code,
            transactional_id=txn_id,
            transaction_timeout=timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert r.error_code == NONE, r
        return int(r.producer_id), int(r.producer_epoch)

    def find_group_coordinator(self, group: str) -> None:
        self.retried(10, 4, lambda r: r.coordinators[0].error_code, key_type=0,
                     coordinator_keys=[group])  # fmt: skip

    def add(self, txn_id: str, pid: int, epoch: int, topic: str) -> int:
        r = self.retried(
            24,
            3,
            lambda r: (
                r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            ),
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[{"name": topic, "partitions": [0]}],
        )
        return int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def produce(self, version: int, txn_id: str, pid: int, epoch: int, topic: str) -> int:
        batch = encode_batch(
            [b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        r = self.request(
            0,
            version,
            transactional_id=txn_id,
            acks=-1,
            timeout=10_000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        )
        return int(r.responses[0].partition_responses[0].error_code)

    def end(self, version: int, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
        r = self.request(
            26, version, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
            committed=commit,
        )  # fmt: skip
        return int(r.error_code)

    def offsets(self, topic: str) -> tuple[int, int]:
        """(last stable offset, high watermark) of partition 0."""
        out = []
        for isolation in (1, 0):
            r = self.request(
                2,
                7,
                replica_id=-1,
                isolation_level=isolation,
                topics=[
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                        ],
                    }
                ],
            )
            p = r.topics[0].partitions[0]
            assert int(p.error_code) == NONE, p
            out.append(int(p.offset))
        return out[0], out[1]

    def describe(self, txn_id: str) -> Any:
        (state,) = self.request(65, 0, transactional_ids=[txn_id]).transaction_states
        return state

    def txn_offset_commit(
        self, version: int, txn_id: str, group: str, pid: int, epoch: int, topic: str
    ) -> int:
        """One TxnOffsetCommit (asked again while the group coordinator loads)."""
        r = self.retried(
            28,
            version,
            lambda r: r.topics[0].partitions[0].error_code,
            transactional_id=txn_id,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        )
        return int(r.topics[0].partitions[0].error_code)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    kafka = KafkaLauncher().start(
        ClusterSpec(brokers=1, coordinators=0, settings=KAFKA_SETTINGS, seed=1),
        tmp_path_factory.mktemp("kafka-tv0"),
    )
    ours = start_cluster(
        tmp_path_factory.mktemp("ours-tv0"), brokers=1, settings=["transaction.version=0"]
    )
    out = {
        "apache-kafka": Side("apache-kafka", kafka.bootstrap),
        "txnchaos": Side("txnchaos", str(ours.state()["bootstrap"])),
    }
    try:
        yield out
    finally:
        for side in out.values():
            side.client.close()
        ours.down()
        kafka.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_verification_is_on_at_transaction_version_0(sides: dict[str, Side], flavour: str) -> None:
    side = sides[flavour]
    topic, txn_id, group = side.topic(), unique("verify"), unique("g")
    pid, epoch = side.init(txn_id)
    # Produce v11 to a partition never added: refused, nothing written
    assert side.produce(11, txn_id, pid, epoch, topic) == TRANSACTION_ABORTABLE
    assert side.offsets(topic) == (0, 0)
    # TxnOffsetCommit v4 without AddOffsetsToTxn: refused the same way
    side.find_group_coordinator(group)
    assert side.txn_offset_commit(4, txn_id, group, pid, epoch, topic) == TRANSACTION_ABORTABLE


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tv2_requests_at_transaction_version_0_are_unsupported(
    sides: dict[str, Side], flavour: str
) -> None:
    side = sides[flavour]
    topic = side.topic()
    # Produce v12 (the broker would add the partition): refused, nothing written
    txn_id = unique("p12")
    pid, epoch = side.init(txn_id)
    assert side.produce(12, txn_id, pid, epoch, topic) == UNSUPPORTED_VERSION
    assert side.offsets(topic) == (0, 0)
    assert side.describe(txn_id).transaction_state == "Empty"
    # EndTxn v5 of a transaction begun the old way: refused, the transaction stays open
    txn_id = unique("e5")
    pid, epoch = side.init(txn_id)
    assert side.add(txn_id, pid, epoch, topic) == NONE
    assert side.produce(11, txn_id, pid, epoch, topic) == NONE
    assert side.end(5, txn_id, pid, epoch, True) == UNSUPPORTED_VERSION
    assert side.describe(txn_id).transaction_state == "Ongoing"
    assert side.offsets(topic) == (0, 1)
    after = side.end(4, txn_id, pid, epoch, False)
    if flavour == "apache-kafka":
        # Kafka 4.4.0 left the id's pending transition set when the v5 append failed:
        # everything after answers CONCURRENT_TRANSACTIONS (until the coordinator reloads)
        assert after == CONCURRENT_TRANSACTIONS
    else:  # ours changed nothing: the old protocol still ends it
        assert after == NONE
    # TxnOffsetCommit v5 (the group coordinator would add the offsets partition)
    txn_id, group = unique("toc5"), unique("g")
    pid, epoch = side.init(txn_id)
    side.find_group_coordinator(group)
    assert side.txn_offset_commit(5, txn_id, group, pid, epoch, topic) == UNSUPPORTED_VERSION
    assert side.describe(txn_id).transaction_state == "Empty"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_describe_transactions_start_time(sides: dict[str, Side], flavour: str) -> None:
    side = sides[flavour]
    topic, txn_id = side.topic(), unique("start")
    pid, epoch = side.init(txn_id)
    assert side.describe(txn_id).transaction_start_time is None  # -1 on the wire
    assert side.add(txn_id, pid, epoch, topic) == NONE
    started = side.describe(txn_id).transaction_start_time
    assert started is not None
    assert side.end(3, txn_id, pid, epoch, True) == NONE
    for _ in range(100):
        done = side.describe(txn_id)
        if done.transaction_state == "CompleteCommit":
            break
        time.sleep(0.1)
    assert (done.transaction_state, done.transaction_start_time) == ("CompleteCommit", started)
    side.init(txn_id)  # a new producer instance: no transaction
    assert side.describe(txn_id).transaction_start_time is None


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_api_versions_v3_omits_a_feature_whose_minimum_is_0(
    sides: dict[str, Side], flavour: str
) -> None:
    side = sides[flavour]
    r = side.request(18, 4, client_software_name="t", client_software_version="1")
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    assert supported["transaction.version"] == (0, 2)
    # finalize level 1 (an upgrade), then v3 lists it as finalized but not as supported
    update = side.request(
        57,
        1,
        timeout=30_000,
        feature_updates=[
            {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 1}
        ],
        validate_only=False,
    )
    assert int(update.error_code) == NONE, update
    for _ in range(100):
        r = side.request(18, 3, client_software_name="t", client_software_version="1")
        finalized = {f.name: f.max_version_level for f in r.finalized_features}
        if finalized.get("transaction.version") == 1:
            break
        time.sleep(0.1)
    assert finalized.get("transaction.version") == 1
    assert "transaction.version" not in {f.name for f in r.supported_features}


def kafka_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One of Kafka's operator commands (kafka-tools of the default release, fetched from
    Maven Central into the cache once)."""
    lib = resolve(
        "kafka-tools",
        DEFAULT_VERSION,
        [
            Artifact("org.apache.kafka", "kafka-tools", DEFAULT_VERSION),
            Artifact("org.slf4j", "slf4j-simple", "1.7.36"),
        ],
    )
    return subprocess.run(
        [
            java_binary(),
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath(lib),
            main_class,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_kafkas_transactions_tool_aborts_an_open_transaction(
    sides: dict[str, Side], flavour: str
) -> None:
    """``kafka-transactions.sh abort --start-offset`` (Kafka's TransactionsCommand, with
    its own client id and the producer's coordinator epoch): ours refused it while an
    admin was a client-id prefix; now it ends the transaction on both clusters."""
    side = sides[flavour]
    topic, txn_id = side.topic(), unique("abort")
    # a long timeout: the coordinator must not end it while two JVMs start (loaded CI)
    pid, epoch = side.init(txn_id, timeout_ms=600_000)
    assert side.add(txn_id, pid, epoch, topic) == NONE
    assert side.produce(11, txn_id, pid, epoch, topic) == NONE
    assert side.offsets(topic) == (0, 1)
    tools = "org.apache.kafka.tools.TransactionsCommand"
    found = kafka_tool(
        tools, "--bootstrap-server", side.bootstrap, "describe-producers", "--topic", topic,
        "--partition", "0",
    )  # fmt: skip
    assert found.returncode == 0 and str(pid) in found.stdout, found.stdout + found.stderr
    done = kafka_tool(
        tools, "--bootstrap-server", side.bootstrap, "abort", "--topic", topic, "--partition",
        "0", "--start-offset", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lso, hw = side.offsets(topic)
    assert lso == hw == 2  # the record and the abort marker: nothing open


def test_acls_tool_against_kafkas_standard_authorizer(sides: dict[str, Side]) -> None:
    """``txnchaos acls`` adds, lists and removes ACLs on Kafka 4.4.0 (TwoPhaseCommit
    included), and Kafka's own kafka-acls.sh lists what it added."""
    from click.testing import CliRunner

    from txnchaos.harness.cli import main

    bootstrap = sides["apache-kafka"].bootstrap

    def acls(*args: str) -> str:
        result = CliRunner().invoke(main, ["acls", "--bootstrap-server", bootstrap, *args])
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result.stdout

    txn_id = unique("alice-2pc")
    acls(
        "--add", "--allow-principal", "User:alice", "--operation", "TwoPhaseCommit",
        "--operation", "Write", "--transactional-id", txn_id,
    )  # fmt: skip
    theirs = kafka_tool(
        "org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap, "--list",
        "--transactional-id", txn_id,
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    assert "operation=TWO_PHASE_COMMIT, permissionType=ALLOW" in theirs.stdout
    assert "operation=WRITE, permissionType=ALLOW" in theirs.stdout
    assert "already exists" in acls(
        "--add", "--allow-principal", "User:alice", "--operation", "Write",
        "--transactional-id", txn_id,
    )  # fmt: skip
    acls(
        "--remove", "--force", "--allow-principal", "User:alice", "--operation",
        "TwoPhaseCommit", "--transactional-id", txn_id,
    )  # fmt: skip
    listed = acls("--list", "--transactional-id", txn_id)
    assert "TWO_PHASE_COMMIT" not in listed and "operation=WRITE" in listed
    acls("--remove", "--force", "--transactional-id", txn_id)
    assert acls("--list", "--transactional-id", txn_id).strip() == ""
