"""The Apache Kafka launcher's plan (no JVM started): ids and roles, one listener per
source of traffic, settings passed through or refused with their name."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.harness.launch.errors import LaunchError
from txnchaos.harness.launch.kafka.layout import (
    INTERNAL_SEGMENT_BYTES,
    Addressing,
    KafkaLayout,
    SegmentSize,
    hosts_file,
    server_properties,
    source_ip,
    split_settings,
)
from txnchaos.harness.launch.kafka.release import KafkaRelease, java_problem


def props(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def planned(brokers: int, controllers: int, settings: list[str] | None = None) -> KafkaLayout:
    layout = KafkaLayout.plan("4.4.0", brokers, controllers, settings or [])
    for node in layout.nodes:
        layout.pick_ports(node)
    return layout


def test_brokers_keep_their_ids_and_controllers_take_the_coordinators_ids() -> None:
    layout = planned(2, 1)
    assert [(n.id, n.role) for n in layout.nodes] == [
        (1001, "controller"),
        (1, "broker"),
        (2, "broker"),
    ]
    combined = planned(3, 0)
    assert [(n.id, n.role) for n in combined.nodes] == [
        (1, "broker+controller"),
        (2, "broker"),
        (3, "broker"),
    ]
    ports = [p for n in layout.nodes for p in n.all_ports()]
    assert len(ports) == len(set(ports)) and all(ports)


def test_each_broker_has_a_listener_per_source_advertised_at_its_proxy(tmp_path: Path) -> None:
    layout = planned(2, 1, ["transaction.max.timeout.ms=60000", "transaction.version=0"])
    b1 = layout.node(1)
    addressing = Addressing(
        client=("127.0.0.1", 5000),
        from_peer={1: ("127.0.0.1", 5011), 2: ("127.0.0.1", 5021)},
        controllers={1001: "127.1.0.1"},
    )
    p = props(server_properties(layout, b1, tmp_path, addressing))
    assert p["process.roles"] == "broker" and p["node.id"] == "1"
    assert p["inter.broker.listener.name"] == "FROM_1"
    assert p["listeners"] == (
        f"CLIENT://127.0.0.1:{b1.client_port},FROM_1://127.0.0.1:{b1.peer_ports[1]},"
        f"FROM_2://127.0.0.1:{b1.peer_ports[2]}"
    )
    assert p["advertised.listeners"] == (
        "CLIENT://127.0.0.1:5000,FROM_1://127.0.0.1:5011,FROM_2://127.0.0.1:5021"
    )
    port = layout.node(1001).controller_port
    assert p["controller.quorum.voters"] == f"1001@kafka-n1001:{port}"
    # the controller's name leads this broker to its own proxy of its link to the controller
    assert hosts_file(layout, b1, addressing) == "127.0.0.1 localhost\n127.1.0.1 kafka-n1001\n"
    assert source_ip(1) == "127.1.0.1" and source_ip(1001) == "127.1.3.233"
    assert p["transaction.max.timeout.ms"] == "60000"
    assert "transaction.version" not in p  # a feature level given to the storage format
    assert p["transaction.state.log.replication.factor"] == "2"
    controller = props(server_properties(layout, layout.node(1001), tmp_path, Addressing()))
    assert controller["process.roles"] == "controller"
    assert controller["controller.quorum.voters"] == f"1001@kafka-n1001:{port}"
    # KRaft followers fetch from what the leader advertises: its name, resolved per node
    assert controller["advertised.listeners"] == f"CONTROLLER://kafka-n1001:{port}"
    assert "127.0.0.1 kafka-n1001" in hosts_file(layout, layout.node(1001), Addressing())


def test_before_3_9_no_controller_advertises_its_listener(tmp_path: Path) -> None:
    """Kafka 3.3-3.8 refuse an advertised controller listener ("must be empty when
    process.roles=controller"; on a combined node it must not contain the controller's):
    3.7.1's StorageTool failed on it. Their followers fetch from the voters' names."""
    old = KafkaRelease.parse("3.8.0")
    assert not old.controller_advertises and KafkaRelease.parse("3.9.0").controller_advertises
    layout = planned(2, 1)
    controller = props(
        server_properties(
            layout, layout.node(1001), tmp_path, Addressing(), advertise_controller=False
        )
    )
    assert "advertised.listeners" not in controller
    assert controller["controller.quorum.voters"].startswith("1001@kafka-n1001:")
    combined = planned(2, 0)
    node = props(
        server_properties(
            combined, combined.node(1), tmp_path, Addressing(), advertise_controller=False
        )
    )
    assert "CONTROLLER" not in node["advertised.listeners"]
    assert "CONTROLLER" in node["listeners"]


def test_settings_kafka_cannot_take_are_refused_by_name() -> None:
    assert split_settings(["a.b=1", "transaction.version=2"]) == ({"a.b": "1"}, 2)
    with pytest.raises(LaunchError, match=r"txnchaos\.bug\.skip-markers is a bug switch"):
        split_settings(["txnchaos.bug.skip-markers=true"])
    with pytest.raises(LaunchError, match="listeners is set by the kafka launcher"):
        split_settings(["listeners=PLAINTEXT://:9092"])
    with pytest.raises(LaunchError, match="PLAINTEXT listeners only"):
        split_settings(["listener.security.protocol=SASL_PLAINTEXT"])
    with pytest.raises(LaunchError, match=r"transaction\.version: expected 0, 1 or 2"):
        split_settings(["transaction.version=3"])


def test_layout_survives_a_save(tmp_path: Path) -> None:
    layout = planned(2, 2, ["x=1"])
    layout.cluster_id = "abc"
    layout.save(tmp_path)
    assert KafkaLayout.load(tmp_path) == layout


def test_releases() -> None:
    r = KafkaRelease.parse("4.4.0")
    assert r.kraft and r.has_transaction_version and r.min_java == 17
    old = KafkaRelease.parse("2.8.2")
    assert not old.kraft and not old.has_transaction_version
    assert java_problem(r, 11) == "Apache Kafka 4.4.0 needs Java 17 or newer (this is Java 11)"
    assert java_problem(r, 17) is None
    assert java_problem(old, 17) is None and java_problem(old, 25) is None  # measured
    ancient = KafkaRelease.parse("2.3.1")
    assert ancient.scala == "2.12" and old.scala == "2.13"
    assert "ZOOKEEPER-3779" in (java_problem(ancient, 17) or "")
    with pytest.raises(LaunchError, match="expects a release such as"):
        KafkaRelease.parse("4.x")


def release_lib(tmp_path: Path, with_internal: bool) -> Path:
    """A lib directory whose kafka-storage jar's LogConfig does or does not define
    internal.segment.bytes (as 4.4.0's does and 4.0.0's does not)."""
    import zipfile

    lib = tmp_path / ("lib-internal" if with_internal else "lib-plain")
    lib.mkdir()
    body = b"segment.bytes" + (b" internal.segment.bytes" if with_internal else b"")
    with zipfile.ZipFile(lib / "kafka-storage-4.9.9.jar", "w") as z:
        z.writestr("org/apache/kafka/storage/internals/log/LogConfig.class", body)
    return lib


def test_small_segments_become_a_topic_setting_where_the_release_has_one(tmp_path: Path) -> None:
    layout = planned(1, 0, ["log.segment.bytes=2048", "log.roll.ms=500"])
    plan = SegmentSize.plan(layout.settings, "4.4.0", release_lib(tmp_path, True))
    assert plan.topic_configs == {INTERNAL_SEGMENT_BYTES: "2048"}
    text = server_properties(layout, layout.nodes[0], tmp_path, None, segments=plan)
    assert "log.segment.bytes" not in props(text) and props(text)["log.roll.ms"] == "500"
    assert "internal.segment.bytes=2048" in text  # the note, as a comment line


def test_small_segments_on_a_release_without_the_topic_setting_take_kafkas_minimum(
    tmp_path: Path,
) -> None:
    layout = planned(1, 0, ["log.segment.bytes=2048"])
    plan = SegmentSize.plan(layout.settings, "4.0.0", release_lib(tmp_path, False))
    assert plan.topic_configs == {} and plan.note and "1048576" in plan.note
    text = server_properties(layout, layout.nodes[0], tmp_path, None, segments=plan)
    assert props(text)["log.segment.bytes"] == "1048576"


def test_segment_sizes_kafka_takes_pass_through(tmp_path: Path) -> None:
    lib = release_lib(tmp_path, True)
    assert SegmentSize.plan(["log.segment.bytes=2048"], "3.9.1", lib) == SegmentSize()
    assert SegmentSize.plan(["log.segment.bytes=2097152"], "4.4.0", lib) == SegmentSize()
    assert SegmentSize.plan(["log.roll.ms=100"], "4.4.0", lib) == SegmentSize()
