"""Apache Kafka's own tools and Java client against our cluster, as against Kafka (issue 34
§2), and our tools and client against Kafka.

Kafka's side is the release the kafka launcher runs by default (4.4.0) and its
``kafka-tools`` jar set (TransactionsCommand, FeatureCommand, AclCommand, ConfigCommand,
VerifiableProducer, TransactionalMessageCopier, ConsoleConsumer), both fetched from Maven
Central into the cache once. Where a command's answer can be compared, it is run on both
clusters and the normalised answers must be equal. A known difference still being fixed
would be an ``xfail(strict=True)`` naming it (it turns into a failure, XPASS, once fixed,
so its marker goes then); none is left.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from tests.harness.launch.helpers import create_topic
from txnchaos.harness.cli import main as txnchaos
from txnchaos.harness.clients import FatalError, PreparedTxnState, ProducerConfig
from txnchaos.harness.clients import Producer as OurProducer
from txnchaos.harness.launch.base import ClusterHandle, ClusterSpec
from txnchaos.harness.launch.kafka.launcher import KafkaLauncher
from txnchaos.harness.launch.kafka.tools import run_tool, tools_lib
from txnchaos.harness.launch.local_launcher import LocalLauncher
from txnchaos.harness.workload.final_read import list_ends

from ..conftest import start_cluster

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow]

WAIT_S = 60.0
SETTINGS = ["transaction.version=2", "transaction.two.phase.commit.enable=true"]
#: Kafka 4.4 serves InitProducerId v6 (KIP-939) as an unstable version only
KAFKA_SETTINGS = [*SETTINGS, "unstable.api.versions.enable=true"]


@pytest.fixture(scope="module", autouse=True)
def kafka_tools() -> Path:
    """The kafka-tools jar set, fetched (first use only) before any test times anything."""
    return tools_lib()


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    spec = ClusterSpec(brokers=1, settings=list(SETTINGS), proxied=False)
    handle = LocalLauncher().start(spec, tmp_path_factory.mktemp("ours"))
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    spec = ClusterSpec(brokers=1, settings=list(KAFKA_SETTINGS), proxied=False)
    handle = KafkaLauncher().start(spec, tmp_path_factory.mktemp("kafka"))
    yield handle
    handle.stop()


def cluster(request: pytest.FixtureRequest, side: str) -> ClusterHandle:
    handle: ClusterHandle = request.getfixturevalue(side)
    return handle


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def tool(name: str, bootstrap: str, *args: str) -> str:
    r = run_tool(name, ["--bootstrap-server", bootstrap, *args])
    assert r.returncode == 0, f"{name} {' '.join(args)}: {r.stdout}\n{r.stderr[-3000:]}"
    return r.stdout


def table(text: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated table as rows of column -> value."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    return [
        dict(zip(header, (v.strip() for v in line.split("\t")), strict=False)) for line in lines[1:]
    ]


#: the open transactions' timeout: longer than a few JVM tool runs on a loaded machine (a
#: timed-out transaction is aborted by the coordinator and its producer fenced)
TRANSACTION_TIMEOUT_MS = 600_000


def open_transaction(bootstrap: str, topic: str, tid: str) -> Producer:
    """A librdkafka producer with one record of an open transaction in ``topic``-0."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(WAIT_S)
    return p


def stable(bootstrap: str, topic: str) -> bool:
    return all(e.lso == e.high_watermark for e in list_ends(bootstrap, [topic]))


def wait_for(condition: Any, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# ---- kafka-transactions (TransactionsCommand) ------------------------------------------------


def transactions_tool_view(bootstrap: str) -> dict[str, Any]:
    """list, describe, describe-producers and find-hanging around one open transaction,
    without what differs between any two runs (ids, times, names)."""
    topic, tid = unique("tools"), unique("tools-tx")
    create_topic(bootstrap, partitions=1, name=topic)
    p = open_transaction(bootstrap, topic, tid)
    listed = [
        r
        for r in table(tool("kafka-transactions", bootstrap, "list"))
        if r["TransactionalId"] == tid
    ]
    described = table(tool("kafka-transactions", bootstrap, "describe", "--transactional-id", tid))
    producers = table(
        tool(
            "kafka-transactions",
            bootstrap,
            "describe-producers",
            "--topic",
            topic,
            "--partition",
            "0",
        )
    )
    hanging = table(tool("kafka-transactions", bootstrap, "find-hanging", "--broker-id", "1"))
    p.abort_transaction(WAIT_S)
    d = described[0]
    return {
        "list": [(r["Coordinator"], r["TransactionState"]) for r in listed],
        "describe": {
            "columns": sorted(d),
            "epoch": d["ProducerEpoch"],
            "state": d["TransactionState"],
            "timeout": d["TransactionTimeoutMs"],
            "started": d["CurrentTransactionStartTimeMs"].isdigit(),
            "partitions": d["TopicPartitions"].replace(topic, "T"),
        },
        "producers": [
            {k: v for k, v in r.items() if k not in ("ProducerId", "LastTimestamp")}
            for r in producers
        ],
        "hanging": [r for r in hanging if r.get("Topic") == topic],
    }


def test_kafka_transactions_list_describe_and_find_hanging_on_ours_as_on_kafka(
    ours: ClusterHandle, kafka: ClusterHandle
) -> None:
    on_kafka = transactions_tool_view(kafka.bootstrap)
    on_ours = transactions_tool_view(ours.bootstrap)
    assert on_kafka["describe"]["state"] == "Ongoing" and on_kafka["list"], on_kafka
    assert on_ours == on_kafka


@pytest.mark.parametrize("side", ["kafka", "ours"])
def test_kafka_transactions_abort_ends_an_open_transaction(
    request: pytest.FixtureRequest, side: str
) -> None:
    bootstrap = cluster(request, side).bootstrap
    topic, tid = unique("abort"), unique("abort-tx")
    create_topic(bootstrap, partitions=1, name=topic)
    open_transaction(bootstrap, topic, tid)
    r = run_tool(
        "kafka-transactions",
        ["--bootstrap-server", bootstrap, "abort", "--topic", topic, "--partition", "0",
         "--start-offset", "0"],
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    wait_for(lambda: stable(bootstrap, topic), "the LSO to pass the aborted transaction")


def force_terminate_view(bootstrap: str) -> dict[str, Any]:
    topic, tid = unique("force"), unique("force-tx")
    create_topic(bootstrap, partitions=1, name=topic)
    open_transaction(bootstrap, topic, tid)
    out = tool(
        "kafka-transactions", bootstrap, "forceTerminateTransaction", "--transactionalId", tid
    )
    wait_for(lambda: stable(bootstrap, topic), "the terminated transaction's markers")
    d = table(tool("kafka-transactions", bootstrap, "describe", "--transactional-id", tid))[0]
    return {
        "output": out.strip(),
        "state": d["TransactionState"],
        "epoch": d["ProducerEpoch"],
        "timeout": d["TransactionTimeoutMs"],
        "start": d["CurrentTransactionStartTimeMs"],
        "partitions": d.get("TopicPartitions", ""),
    }


def test_kafka_transactions_force_terminate_on_ours_as_on_kafka(
    ours: ClusterHandle, kafka: ClusterHandle
) -> None:
    on_kafka = force_terminate_view(kafka.bootstrap)
    assert on_kafka["state"] in ("CompleteAbort", "Empty"), on_kafka
    assert force_terminate_view(ours.bootstrap) == on_kafka


# ---- kafka-features (FeatureCommand) ---------------------------------------------------------


def transaction_version_line(text: str) -> str:
    line = next(x for x in text.splitlines() if "Feature: transaction.version" in x)
    return re.sub(r"\s+Epoch: \d+", "", re.sub(r"[ \t]+", " ", line)).strip()


def test_kafka_features_describe_downgrade_upgrade_on_ours_as_on_kafka(
    ours: ClusterHandle, kafka: ClusterHandle
) -> None:
    def run(bootstrap: str) -> list[str]:
        out = [transaction_version_line(tool("kafka-features", bootstrap, "describe"))]
        out.append(
            tool(
                "kafka-features", bootstrap, "downgrade", "--feature", "transaction.version=1"
            ).strip()
        )
        out.append(transaction_version_line(tool("kafka-features", bootstrap, "describe")))
        out.append(
            tool(
                "kafka-features", bootstrap, "upgrade", "--feature", "transaction.version=2"
            ).strip()
        )
        out.append(transaction_version_line(tool("kafka-features", bootstrap, "describe")))
        return out

    on_kafka = run(kafka.bootstrap)
    assert on_kafka[0].endswith("SupportedMaxVersion: 2 FinalizedVersionLevel: 2"), on_kafka
    assert run(ours.bootstrap) == on_kafka


# ---- kafka-configs (ConfigCommand) ---------------------------------------------------------------


def config_lines(text: str, names: set[str] | None = None) -> dict[str, str]:
    """kafka-configs' ``  name=value sensitive=... synonyms={...}`` lines by name (those of
    ``names`` only, when given)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("  ") and "=" in line:
            name = line.strip().split("=", 1)[0]
            if names is None or name in names:
                out[name] = line.strip()
    return out


def test_kafka_configs_describe_on_ours_as_on_kafka(
    ours: ClusterHandle, kafka: ClusterHandle
) -> None:
    """``kafka-configs --describe`` of a topic with an override, of broker 1 and of the
    brokers' defaults prints the same lines on both clusters for the configs ours has
    (docs/conformance.md, "DescribeConfigs"; min.insync.replicas apart: Kafka 4.4 keeps it
    as a cluster-wide dynamic default, eligible leader replicas' doing)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from txnchaos.harness.conformance.probes.describe_configs import BROKER_CONFIGS

    topic = unique("configs")

    def run(bootstrap: str) -> dict[str, Any]:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(topic, 1, 1, config={"retention.ms": "600000"})
        admin.create_topics([new])[topic].result(WAIT_S)
        described = tool(
            "kafka-configs", bootstrap, "--describe", "--entity-type", "topics",
            "--entity-name", topic, "--all",
        )  # fmt: skip
        broker = tool(
            "kafka-configs", bootstrap, "--describe", "--entity-type", "brokers",
            "--entity-name", "1", "--all",
        )  # fmt: skip
        dynamic = tool(
            "kafka-configs", bootstrap, "--describe", "--entity-type", "brokers",
            "--entity-name", "1",
        )  # fmt: skip
        return {
            "topic": described.splitlines()[0],
            "topic configs": config_lines(described),
            "broker": broker.splitlines()[0],
            "broker configs": config_lines(broker, set(BROKER_CONFIGS)),
            "dynamic": dynamic.strip(),
        }

    on_ours, on_kafka = run(ours.bootstrap), run(kafka.bootstrap)
    mine = set(on_ours["topic configs"]) - {"min.insync.replicas"}
    assert len(mine) == 12 - 1, on_ours
    assert on_ours["topic configs"]["retention.ms"] == (
        "retention.ms=600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=600000}"
    )
    on_kafka["topic configs"] = {k: v for k, v in on_kafka["topic configs"].items() if k in mine}
    del on_ours["topic configs"]["min.insync.replicas"]
    assert on_ours == on_kafka
    assert on_ours["broker configs"]["sasl.jaas.config"] == (
        "sasl.jaas.config=null sensitive=true synonyms={}"
    )


# ---- kafka-acls (AclCommand) on our SASL cluster with ACLs -------------------------------------

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="node" password="node-pw" user_node="node-pw" user_admin="admin-pw" '
    'user_alice="alice-pw"'
)


def test_kafka_acls_grants_two_phase_commit_on_ours(tmp_path: Path) -> None:
    local = start_cluster(
        tmp_path / "acl",
        settings=[
            "listener.security.protocol=SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN",
            f"sasl.jaas.config={JAAS};",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
            *SETTINGS,
        ],
    )
    try:
        bootstrap = str(local.state()["bootstrap"])
        config = tmp_path / "admin.properties"
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-pw";\n'
        )
        acls = ["--command-config", str(config)]
        added = tool(
            "kafka-acls", bootstrap, *acls, "--add", "--allow-principal", "User:alice",
            "--operation", "TwoPhaseCommit", "--operation", "Write", "--transactional-id", "2pc-",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert "TWO_PHASE_COMMIT" in added, added
        listed = tool("kafka-acls", bootstrap, *acls, "--list", "--transactional-id", "2pc-",
                      "--resource-pattern-type", "prefixed")  # fmt: skip
        rules = re.findall(
            r"\(principal=(\S+), host=\*, operation=(\w+), permissionType=ALLOW\)", listed
        )
        assert sorted(rules) == [("User:alice", "TWO_PHASE_COMMIT"), ("User:alice", "WRITE")], (
            listed
        )
        tool(
            "kafka-acls", bootstrap, *acls, "--remove", "--force",
            "--allow-principal", "User:alice", "--operation", "TwoPhaseCommit",
            "--transactional-id", "2pc-",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        left = tool("kafka-acls", bootstrap, *acls, "--list", "--transactional-id", "2pc-",
                    "--resource-pattern-type", "prefixed")  # fmt: skip
        assert "TWO_PHASE_COMMIT" not in left and "WRITE" in left, left
    finally:
        local.down()


# ---- the Java producer and consumer: TV2 transactions, read_committed --------------------------


def test_java_transactional_copier_and_read_committed_consumer_on_ours(ours: ClusterHandle) -> None:
    """Kafka's 4.4 Java client at transaction.version 2 (Produce v12, EndTxn v5): an
    idempotent VerifiableProducer fills a topic, TransactionalMessageCopier copies it in
    transactions of 10 with random aborts (consume-transform-produce, offsets in the
    transaction), and a read_committed ConsoleConsumer reads every record exactly once."""
    bootstrap = ours.bootstrap
    source, sink = unique("java-in"), unique("java-out")
    create_topic(bootstrap, partitions=1, name=source)
    create_topic(bootstrap, partitions=1, name=sink)
    count = 200
    tool("kafka-verifiable-producer", bootstrap, "--topic", source, "--max-messages", str(count),
         "--acks", "-1", "--value-prefix", "7")  # fmt: skip
    r = run_tool(
        "transactional-message-copier",
        ["--broker-list", bootstrap, "--input-topic", source, "--input-partition", "0",
         "--output-topic", sink, "--transactional-id", unique("copier"), "--consumer-group",
         unique("copier-g"), "--transaction-size", "10", "--max-messages", str(count),
         "--enable-random-aborts", "--use-group-metadata"],
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert '"remaining":0' in r.stdout.replace(" ", ""), r.stdout[-2000:]
    read = tool("kafka-console-consumer", bootstrap, "--topic", sink, "--from-beginning",
                "--isolation-level", "read_committed", "--max-messages", str(count + 1),
                "--timeout-ms", "15000")  # fmt: skip
    values = read.split()
    assert sorted(values) == sorted(f"7.{i}" for i in range(count)), values[:20]


# ---- our tools and client against Apache Kafka --------------------------------------------------


def ours_tool(*args: str) -> Any:
    r = CliRunner().invoke(txnchaos, ["transactions", *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.output


def test_txnchaos_transactions_against_kafka(kafka: ClusterHandle) -> None:
    import json

    bootstrap = kafka.bootstrap
    topic, tid = unique("ours-tool"), unique("ours-tool-tx")
    create_topic(bootstrap, partitions=1, name=topic)
    open_transaction(bootstrap, topic, tid)
    at = ["--bootstrap", bootstrap, "--json"]
    listed = json.loads(ours_tool("list", *at))
    assert any(t["transactional_id"] == tid and t["state"] == "Ongoing" for t in _rows(listed)), (
        listed
    )
    described = json.loads(ours_tool("describe", *at, "--transactional-id", tid))
    assert "Ongoing" in json.dumps(described) and topic in json.dumps(described)
    producers = json.loads(
        ours_tool("describe-producers", *at, "--topic", topic, "--partition", "0")
    )
    assert [(p["start_offset"], p["producer_epoch"]) for p in producers] == [(0, 0)], producers
    ours_tool("find-hanging", *at, "--broker", "1")
    ours_tool("abort", *at, "--topic", topic, "--partition", "0", "--start-offset", "0")
    wait_for(lambda: stable(bootstrap, topic), "Kafka to write the admin abort's marker")


def _rows(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict):
        for value in doc.values():
            if isinstance(value, list):
                return value
    return list(doc)


def test_our_tv2_client_against_kafka(kafka: ClusterHandle) -> None:
    bootstrap = kafka.bootstrap
    topic, tid = unique("ours-tv2"), unique("ours-tv2-tx")
    create_topic(bootstrap, partitions=2, name=topic)

    async def run() -> tuple[int, list[int]]:
        p = OurProducer(ProducerConfig(bootstrap, transactional_id=tid))
        await p.init_transactions(WAIT_S)
        epochs = [p.ids.epoch]
        for commit in (True, False, True):
            await p.begin_transaction()
            for i in range(4):
                p.send(topic, i % 2, f"{commit}-{i}".encode())
            await p.flush(WAIT_S)  # written: the coordinator has a transaction to end
            await (p.commit_transaction(WAIT_S) if commit else p.abort_transaction(WAIT_S))
            epochs.append(p.ids.epoch)
        tv = p.transaction_version
        await p.close()
        return tv, epochs

    tv, epochs = asyncio.run(run())
    assert tv == 2
    assert epochs == list(range(epochs[0], epochs[0] + 4)), epochs  # a new epoch per transaction
    wait_for(lambda: stable(bootstrap, topic), "the markers")
    ends = list_ends(bootstrap, [topic])
    assert sum(e.high_watermark for e in ends) == 12 + 6  # three transactions' records + markers


def test_our_two_phase_commit_client_against_kafka(kafka: ClusterHandle) -> None:
    """KIP-939 on Kafka 4.4 (transaction.two.phase.commit.enable; InitProducerId v6 is an
    unstable version there): our 2PC producer prepares a transaction, which has no timeout,
    and commits it. Recovering a prepared transaction in a new instance (KeepPreparedTxn)
    is not in any served release: 4.4.0 answers UNSUPPORTED_VERSION, which our producer
    reports as fatal."""
    bootstrap = kafka.bootstrap
    topic, tid = unique("ours-2pc"), unique("ours-2pc-tx")
    create_topic(bootstrap, partitions=1, name=topic)

    def config() -> ProducerConfig:
        return ProducerConfig(bootstrap, transactional_id=tid, enable_two_phase_commit=True)

    async def prepare_and_commit() -> PreparedTxnState:
        p = OurProducer(config())
        await p.init_transactions(WAIT_S)
        await p.begin_transaction()
        for i in range(3):
            p.send(topic, 0, f"p{i}".encode())
        state = await p.prepare_transaction(WAIT_S)
        assert not stable(bootstrap, topic)  # prepared: still open
        await p.commit_transaction(WAIT_S)
        await p.close()
        return state

    async def keep_prepared() -> None:
        p = OurProducer(config())
        try:
            await p.init_transactions(WAIT_S, keep_prepared_txn=True)
        finally:
            await p.close()

    state = asyncio.run(prepare_and_commit())
    assert not state.is_empty
    wait_for(lambda: stable(bootstrap, topic), "the commit's marker")
    assert list_ends(bootstrap, [topic])[0].high_watermark == 4
    with pytest.raises(FatalError, match="UNSUPPORTED_VERSION: InitProducerId"):
        asyncio.run(keep_prepared())
