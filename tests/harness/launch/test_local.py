"""The local launcher: real node processes, a proxy on every link, node faults by PID."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from txnchaos.harness.launch.base import ClusterSpec, UnsupportedFault, package_version
from txnchaos.harness.launch.errors import LaunchError
from txnchaos.harness.launch.local import LocalCluster, is_our_node
from txnchaos.harness.launch.local_launcher import STATE_FILE, LocalHandle, LocalLauncher
from txnchaos.rundir.fault_log import read_fault_log

from .helpers import StatsConsumer, create_topic, metric, produce, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CONTROLLER = 1001
BROKERS = (1, 2)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHandle]:
    """Two brokers and a coordinator node (hosting the controller), fully proxied."""
    run_dir = tmp_path_factory.mktemp("local-proxied")
    handle = LocalLauncher().start(ClusterSpec(brokers=2, coordinators=1, seed=7), run_dir)
    yield handle
    handle.stop()


def _stats(handle: LocalHandle) -> dict[str, dict]:
    assert handle.fleet is not None
    return {name: doc["stats"] for name, doc in handle.fleet.describe()["links"].items()}


def test_every_link_has_a_proxy(mesh: LocalHandle) -> None:
    nodes = [CONTROLLER, *BROKERS]
    expected = {f"client->n{b}" for b in nodes} | {
        f"n{a}->n{b}" for a in nodes for b in nodes if a != b
    }
    assert set(mesh.links) == expected
    assert mesh.fleet is not None
    links = mesh.fleet.fleet.links
    by_node = {n.id: n for n in mesh.nodes}
    for b in nodes:
        # Clients are told the proxy's address; every link to b forwards to b's real port.
        assert by_node[b].advertised == links[f"client->n{b}"].bootstrap
        assert by_node[b].advertised != f"127.0.0.1:{by_node[b].port}"
        for name, link in links.items():
            if name.endswith(f"->n{b}"):
                assert link.upstream == ("127.0.0.1", by_node[b].port)
    assert mesh.bootstrap == ",".join(links[f"client->n{b}"].bootstrap for b in BROKERS)


def test_clients_only_reach_nodes_through_proxies(mesh: LocalHandle) -> None:
    assert mesh.fleet is not None
    links = mesh.fleet.fleet.links
    client_addresses = {links[f"client->n{n}"].bootstrap for n in (CONTROLLER, *BROKERS)}
    topic = create_topic(mesh.bootstrap, partitions=4)
    producer = Producer({"bootstrap.servers": mesh.bootstrap})
    advertised = {f"{b.host}:{b.port}" for b in producer.list_topics(timeout=30).brokers.values()}
    assert advertised == client_addresses

    values = [f"v{i:04d}".encode() * 50 for i in range(400)]
    produce(mesh.bootstrap, topic, values)
    consumer = StatsConsumer(mesh.bootstrap, topic)
    try:
        assert sorted(consumer.read_until(len(values))) == sorted(values)
        wait_for(lambda: consumer.connected, what="consumer statistics")
        consumer.poll_for(0.5)  # one more statistics round
    finally:
        consumer.close()
    # librdkafka itself reports which broker addresses it had connections to.
    assert consumer.connected <= client_addresses, consumer.connected
    for b in BROKERS:
        assert _stats(mesh)[f"client->n{b}"]["connections_total"] >= 1

    # Every byte a node read came through one of the links leading to it: the node's own
    # count (sampled first) cannot exceed what the proxies forwarded to it (sampled after).
    urls = mesh.metrics_urls()
    node_bytes = {n: metric(url, "txnchaos_bytes_in_total") for n, url in urls.items()}
    stats = _stats(mesh)
    assert sum(node_bytes[n] for n in BROKERS) > 100_000  # the records went in
    for n, count in node_bytes.items():
        proxied = sum(s["bytes_up"] for name, s in stats.items() if name.endswith(f"->n{n}"))
        assert 0 < count <= proxied, (n, count, proxied)


def test_node_to_node_traffic_flows_through_link_proxies(mesh: LocalHandle) -> None:
    """Brokers register, heartbeat and pull metadata through n<B>->n1001."""
    before = _stats(mesh)
    for b in BROKERS:
        assert before[f"n{b}->n{CONTROLLER}"]["connections_active"] >= 1
    create_topic(mesh.bootstrap)  # a metadata change: held heartbeats answer, brokers pull

    def moved() -> bool:
        now = _stats(mesh)
        return all(
            now[f"n{b}->n{CONTROLLER}"]["bytes_up"] > before[f"n{b}->n{CONTROLLER}"]["bytes_up"]
            and now[f"n{b}->n{CONTROLLER}"]["bytes_down"]
            > before[f"n{b}->n{CONTROLLER}"]["bytes_down"]
            for b in BROKERS
        )

    wait_for(moved, what="broker->controller traffic")


def test_delay_on_broker_to_controller_metadata(mesh: LocalHandle) -> None:
    """CreateTopics answers once every broker pulled the change; delaying the brokers'
    Metadata pulls on their links to the controller shows in the fault log (and only
    there: the client-side links carry no fault)."""
    assert mesh.fleet is not None
    log_path = mesh.fault_log().path
    seen = len(read_fault_log(log_path))
    rule = mesh.fleet.add_rule(
        {"kind": "delay", "link": f"n*->n{CONTROLLER}", "api": "Metadata", "ms": 300}
    )
    try:
        t0 = time.monotonic()
        create_topic(mesh.bootstrap, partitions=2)
        took = time.monotonic() - t0
    finally:
        mesh.fleet.remove_rule(rule.id)
    entries = [e for e in read_fault_log(log_path)[seen:] if e["params"].get("rule") == rule.id]
    delayed = {e["link"] for e in entries if e["kind"] == "delay"}
    assert delayed == {f"n{b}->n{CONTROLLER}" for b in BROKERS}, entries
    assert all(e["target"]["api"] == "Metadata" for e in entries)
    assert took >= 0.3  # a lower bound only: the answer waited for a delayed pull


def test_describe_and_state_file(mesh: LocalHandle) -> None:
    doc = json.loads(json.dumps(mesh.describe()))
    assert doc["launcher"] == "local" and doc["proxied"] is True
    assert doc["flavour"] == "txnchaos" and doc["version"] == package_version()
    assert doc["transaction_version"] == 2  # the nodes' default, as they report it
    assert doc["capabilities"] == ["kill", "pause", "restart", "resume", "tear"]
    assert {n["id"] for n in doc["nodes"]} == {CONTROLLER, *BROKERS}
    assert all(n["pid"] and n["metrics_url"] for n in doc["nodes"])
    assert set(doc["links"]) == set(mesh.links)
    state = json.loads((mesh.run_dir / STATE_FILE).read_text())
    assert state["bootstrap"] == mesh.bootstrap
    assert all("advertised_port" in n for n in state["nodes"])
    restored = LocalCluster.from_state(mesh.run_dir / STATE_FILE)
    assert restored.pids == mesh.cluster.pids
    assert restored.addressing == mesh.cluster.addressing  # `cluster restart` keeps proxies
    by_dir = LocalCluster.from_data_dir(mesh.cluster.data_dir)  # ... with --data-dir too
    assert by_dir.pids == mesh.cluster.pids
    assert by_dir.addressing == mesh.cluster.addressing
    with pytest.raises(UnsupportedFault, match="cannot disconnect"):
        mesh.disconnect(1)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_kill_pause_resume_restart_with_a_consumer(tmp_path: Path) -> None:
    handle = LocalLauncher().start(ClusterSpec(brokers=1, seed=1), tmp_path / "run")
    try:
        topic = create_topic(handle.bootstrap)
        produce(handle.bootstrap, topic, [b"a%d" % i for i in range(20)])
        consumer = StatsConsumer(handle.bootstrap, topic)
        producer = Producer({"bootstrap.servers": handle.bootstrap, "enable.idempotence": True})
        try:
            assert len(consumer.read_until(20)) == 20
            node = handle.node(1)
            assert node.pid is not None and is_our_node(node.pid, 1)

            handle.pause(1)  # SIGSTOP: the process is stopped, clients stall
            pid = node.pid
            wait_for(lambda: _state(pid) == "T", what="the node to stop")
            for i in range(10):
                producer.produce(topic, b"b%d" % i)
            assert producer.flush(1.0) > 0
            assert consumer.poll_for(1.0) == []
            handle.resume(1)
            assert producer.flush(60) == 0
            assert len(consumer.read_until(10)) >= 10

            handle.kill(1)  # SIGKILL: gone, no pid
            assert handle.node(1).pid is None and not is_our_node(node.pid, 1)
            for i in range(10):
                producer.produce(topic, b"c%d" % i)
            handle.restart(1)  # same port, same data
            restarted = handle.node(1)
            assert restarted.port == node.port and restarted.pid != node.pid
            assert producer.flush(60) == 0
            consumer.read_until(10)

            handle.pause(1)
            handle.restart(1)  # a paused node restarts too (resumed, stopped, started)
            produce(handle.bootstrap, topic, [b"d%d" % i for i in range(10)])
            consumer.read_until(10)
        finally:
            handle.cluster.resume_node(1)  # closing a consumer waits for its coordinator
            consumer.close()
        expected = {
            f"{p}{i}".encode()
            for p, n in (("a", 20), ("b", 10), ("c", 10), ("d", 10))
            for i in range(n)
        }
        assert set(consumer.values) == expected
        fresh = StatsConsumer(handle.bootstrap, topic)  # the data survived both restarts
        try:
            assert set(fresh.read_until(len(expected))) == expected
        finally:
            fresh.close()
    finally:
        handle.stop()
    kinds = [(e["kind"], e["target"]["node"]) for e in read_fault_log(tmp_path / "run")]
    assert kinds == [("pause", 1), ("kill", 1), ("restart", 1), ("pause", 1), ("restart", 1)]
    assert handle.node(1).pid is None


def test_unproxied_local_cluster(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    spec = ClusterSpec(brokers=1, proxied=False, cpus=str(cpu))
    handle = LocalLauncher().start(spec, tmp_path / "run")
    try:
        node = handle.node(1)
        assert node.pid is not None and os.sched_getaffinity(node.pid) == {cpu}
        assert handle.fleet is None and handle.links == []
        assert handle.bootstrap == f"127.0.0.1:{node.port}" == node.advertised
        topic = create_topic(handle.bootstrap)
        produce(handle.bootstrap, topic, [b"x"])
        assert metric(handle.metrics_urls()[1], "txnchaos_bytes_in_total") > 0
        handle.kill(1)
        handle.restart(1)
        restarted = handle.node(1)
        assert restarted.port == node.port
        assert restarted.pid is not None and os.sched_getaffinity(restarted.pid) == {cpu}
    finally:
        handle.stop()
    assert [e["kind"] for e in read_fault_log(tmp_path / "run")] == ["kill", "restart"]


def test_a_cpu_the_machine_lacks_fails_the_launch_before_any_node_starts(tmp_path: Path) -> None:
    absent = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(LaunchError, match=f"CPU\\(s\\) {absent} not available"):
        LocalLauncher().start(ClusterSpec(brokers=1, cpus=str(absent)), tmp_path / "run")
    assert not (tmp_path / "run" / "cluster" / "cluster.json").exists()


def test_a_saved_cpu_list_is_checked_when_the_cluster_starts_again(tmp_path: Path) -> None:
    absent = max(os.sched_getaffinity(0)) + 1
    LocalCluster.prepare(tmp_path, 1, 0, [])  # planned and saved, never started
    layout = json.loads((tmp_path / "cluster.json").read_text())
    (tmp_path / "cluster.json").write_text(json.dumps({**layout, "cpus": str(absent)}))
    with pytest.raises(LaunchError, match=f"CPU\\(s\\) {absent} not available"):
        LocalCluster.prepare(tmp_path, 1, 0, [])
    again = LocalCluster.prepare(tmp_path, 1, 0, [], cpus="all")  # dropping it is allowed
    assert again.layout.cpus is None
    assert json.loads((tmp_path / "cluster.json").read_text())["cpus"] is None
