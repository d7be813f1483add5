"""DescribeConfigs v1-v4 against real nodes, answered as Apache Kafka 4.4.0 answers
(measured with the same requests on both: docs/conformance.md, "DescribeConfigs"):
topic configs are never read-only, typed as Kafka's, with their synonyms (the topic's
override, then the broker's static setting, then the default) when asked; a setting
given to the node is a static broker config; Kafka's errors and messages for an unknown
or invalid topic, a broker id that is not the node's, and a resource type Kafka does
not know; an empty key list asks for everything.

The cluster has a coordinator node (the controller) and two brokers, so a broker
describes a topic through its remote view of the controller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from txnchaos.harness.launch.local import LocalCluster

from ..conftest import start_cluster
from .raw_client import RawClient

pytestmark = pytest.mark.integration

TOPIC, BROKER = 2, 4
NONE, UNKNOWN_TOPIC, INVALID_TOPIC, INVALID_REQUEST = 0, 3, 17, 42
SETTINGS = ["log.segment.bytes=1048576", "num.partitions=1", "message.max.bytes=1048588"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("describe-configs"), brokers=2, coordinators=1, settings=SETTINGS
    )
    try:
        yield c
    finally:
        c.down()


def node(cluster: LocalCluster, node_id: int) -> RawClient:
    n = next(n for n in cluster.state()["nodes"] if n["id"] == node_id)
    return RawClient(n["host"], n["port"])


@pytest.fixture(scope="module")
def broker2(cluster: LocalCluster) -> Iterator[RawClient]:
    client = node(cluster, 2)
    yield client
    client.close()


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    """A topic with an override, created at the controller (node 1001)."""
    name = "described"
    controller = node(cluster, 1001)
    r = controller.request(
        19,
        7,
        topics=[
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "retention.bytes", "value": "1000000"}],
            }
        ],
        timeout=30000,
        validate_only=False,
    )
    controller.close()
    assert r.topics[0].error_code == NONE, r
    return name


def describe(
    client: RawClient,
    resources: list[tuple[int, str, list[str] | None]],
    version: int = 4,
    synonyms: bool = True,
    documentation: bool = False,
) -> list[Any]:
    r = client.request(
        32,
        version,
        resources=[
            {"resource_type": t, "resource_name": n, "configuration_keys": k}
            for t, n, k in resources
        ],
        include_synonyms=synonyms,
        include_documentation=documentation,
    )
    return list(r.results)


def configs(result: Any) -> dict[str, Any]:
    assert result.error_code == NONE, result
    assert result.error_message == ""  # Kafka's, on success
    return {c.name: c for c in result.configs}


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, int(s.source)) for s in entry.synonyms]


def test_topic_configs_are_alterable_typed_and_sourced_as_kafkas(
    broker2: RawClient, topic: str
) -> None:
    got = configs(describe(broker2, [(TOPIC, topic, None)], documentation=True)[0])
    assert all(not c.read_only for c in got.values()), [n for n, c in got.items() if c.read_only]
    assert all(c.documentation for c in got.values())
    rb = got["retention.bytes"]
    assert (rb.value, rb.config_source, rb.config_type) == ("1000000", 1, 5)
    assert synonyms(rb) == [("retention.bytes", "1000000", 1), ("log.retention.bytes", "-1", 5)]
    seg = got["segment.bytes"]  # the node's static log.segment.bytes
    assert (seg.value, seg.config_source, seg.config_type) == ("1048576", 4, 3)
    assert synonyms(seg) == [
        ("log.segment.bytes", "1048576", 4),
        ("log.segment.bytes", "1073741824", 5),
    ]
    assert got["max.message.bytes"].config_source == 4  # given, at the default's value
    assert (got["retention.ms"].config_source, synonyms(got["retention.ms"])) == (5, [])
    assert got["cleanup.policy"].config_type == 7  # LIST
    assert synonyms(got["cleanup.policy"]) == [("log.cleanup.policy", "delete", 5)]


def test_synonyms_and_documentation_only_when_asked(broker2: RawClient, topic: str) -> None:
    got = configs(describe(broker2, [(TOPIC, topic, None)], synonyms=False)[0])
    assert all(c.synonyms == () and c.documentation is None for c in got.values())
    assert got["retention.bytes"].config_source == 1
    for version in (1, 2):  # no type or documentation before v3
        old = configs(describe(broker2, [(TOPIC, topic, ["segment.bytes"])], version)[0])
        assert not old["segment.bytes"].read_only
        assert synonyms(old["segment.bytes"])[0] == ("log.segment.bytes", "1048576", 4)


def test_configuration_keys_filter_and_an_empty_list_asks_for_all(
    broker2: RawClient, topic: str
) -> None:
    every = configs(describe(broker2, [(TOPIC, topic, None)])[0])
    assert set(configs(describe(broker2, [(TOPIC, topic, [])])[0])) == set(every)
    some = describe(broker2, [(TOPIC, topic, ["retention.bytes", "no.such.config"])])[0]
    assert set(configs(some)) == {"retention.bytes"}
    none = describe(broker2, [(BROKER, "2", ["no.such.config"])])[0]
    assert configs(none) == {}


def test_topic_errors_are_kafkas(broker2: RawClient) -> None:
    results = describe(
        broker2,
        [(TOPIC, "no-such-topic", None), (TOPIC, "", None), (TOPIC, "bad name!", None),
         (TOPIC, "..", None), (TOPIC, "x" * 250, None)],
    )  # fmt: skip
    got = [(int(r.error_code), r.error_message, len(r.configs)) for r in results]
    assert got == [
        (UNKNOWN_TOPIC, "", 0),
        (INVALID_TOPIC, "Topic name is invalid: the empty string is not allowed", 0),
        (
            INVALID_TOPIC,
            "Topic name is invalid: 'bad name!' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
            0,
        ),
        (INVALID_TOPIC, "Topic name is invalid: '..' is not allowed", 0),
        (
            INVALID_TOPIC,
            f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max "
            "allowed length 249",
            0,
        ),
    ]
    assert [r.resource_name for r in results][:3] == ["no-such-topic", "", "bad name!"]


def test_broker_resource_as_kafka_answers_it(broker2: RawClient) -> None:
    results = describe(
        broker2,
        [(BROKER, "", None), (BROKER, "1", None), (BROKER, "x1", None), (BROKER, " 2", None),
         (BROKER, "99999999999", None)],
    )  # fmt: skip
    got = [(int(r.error_code), r.error_message, len(r.configs)) for r in results]
    assert got == [
        (NONE, "", 0),  # the cluster-wide dynamic defaults: none
        (INVALID_REQUEST, "Unexpected broker id, expected 2 or empty string, but received 1", 0),
        (INVALID_REQUEST, "Broker id must be an integer, but it is: x1", 0),
        (INVALID_REQUEST, "Broker id must be an integer, but it is:  2", 0),
        (INVALID_REQUEST, "Broker id must be an integer, but it is: 99999999999", 0),
    ]
    for name in ("2", "02", "+2"):  # Java's Integer.parseInt reads these as 2
        own = configs(describe(broker2, [(BROKER, name, None)], documentation=True)[0])
        num = own["num.partitions"]  # static, not alterable in Kafka
        assert (num.value, num.read_only, num.config_source, num.config_type) == ("1", True, 4, 3)
        assert synonyms(num) == [("num.partitions", "1", 4), ("num.partitions", "1", 5)]
        assert num.documentation
        seg = own["log.segment.bytes"]  # static, alterable in Kafka
        assert (seg.read_only, seg.config_source) == (False, 4)
        retention = own["log.retention.ms"]  # no default in Kafka
        assert (retention.value, retention.config_source, synonyms(retention)) == (None, 5, [])
        default = own["transaction.max.timeout.ms"]
        assert (default.read_only, default.config_source) == (True, 5)
        assert synonyms(default) == [("transaction.max.timeout.ms", "900000", 5)]


def test_a_resource_type_kafka_does_not_know_refuses_the_request(broker2: RawClient) -> None:
    """Kafka refuses the whole request (every resource INVALID_REQUEST with its default
    message); a type Kafka knows and the nodes do not serve (GROUP) is refused alone."""
    results = describe(broker2, [(TOPIC, "described", None), (3, "x", None)])
    assert [int(r.error_code) for r in results] == [INVALID_REQUEST, INVALID_REQUEST]
    assert all(r.error_message.startswith("This most likely occurs") for r in results)
    assert [(int(r.resource_type), r.resource_name) for r in results] == [
        (TOPIC, "described"),
        (3, "x"),
    ]
    group, own = describe(broker2, [(32, "g", None), (BROKER, "2", ["num.partitions"])])
    assert int(group.error_code) == INVALID_REQUEST
    assert set(configs(own)) == {"num.partitions"}
