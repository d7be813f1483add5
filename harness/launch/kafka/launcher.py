"""The ``kafka`` launcher: Apache Kafka's own release as the cluster under test.

``txnchaos run SCENARIO --launcher kafka [--kafka-version 4.4.0]`` (or ``cluster.launcher:
kafka`` and ``cluster.kafka_version`` in the scenario) runs the scenario's ``brokers`` and
``coordinators`` as Kafka brokers and KRaft controllers (the id mapping is in
:mod:`.layout`), as JVMs on 127.0.0.1 (:mod:`.cluster`), in ``RUN_DIR/cluster``.

Proxied (the default), every link gets a fault proxy, all made before any JVM starts (the
ports are planned first, so every proxy's upstream is known):

* ``client->n<B>``: each broker's CLIENT listener, which advertises this proxy;
* ``n<A>->n<B>`` for every pair of brokers, A == B included: broker A's inter-broker
  traffic to B (replica fetches, WriteTxnMarkers from A's transaction coordinator,
  AddPartitionsToTxn verification from A's ReplicaManager) through B's ``FROM_<A>``
  listener;
* ``n<A>->n<C>`` from every node A to every other controller C (``n<A>->n<C>.controller``
  when C is broker and controller at once): A's controller-quorum traffic (a broker's
  registration, heartbeats, metadata fetches, forwarded requests; a controller's votes
  and fetches) through the address A's ``controller.quorum.voters`` names.

Node faults (``kill``, ``pause``/``resume``, ``restart``) act on the JVMs by the PIDs this
launcher started. The nodes' Prometheus endpoints are the JMX exporter's (:mod:`.metrics`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ...faults.proxy.thread import FleetThread
from ..base import KILL, PAUSE, RESTART, RESUME, ClusterHandle, ClusterSpec, NodeInfo, link_name
from ..errors import LaunchError
from .cluster import FLAVOUR, KafkaCluster
from .layout import Addressing, KafkaLayout, KafkaNode
from .metrics import UNAVAILABLE
from .release import DEFAULT_VERSION

log = logging.getLogger(__name__)

STATE_FILE = "cluster-state.json"


def controller_link(source: int, controller: KafkaNode) -> str:
    """The link on which node ``source`` reaches controller ``controller``."""
    name = link_name(source, controller.id)
    return f"{name}.controller" if controller.is_broker else name


class KafkaMesh:
    """The proxies of one Kafka cluster: links by name, each to one listener of a node."""

    def __init__(self, layout: KafkaLayout, run_dir: Path, seed: int | str | None) -> None:
        self.layout = layout
        self.fleet = FleetThread(fault_log=run_dir, seed=seed)
        self.addresses: dict[str, tuple[str, int]] = {}
        try:
            for name, port in self._upstreams().items():
                link = self.fleet.add_link(name, ("127.0.0.1", port))
                self.addresses[name] = link.address
        except BaseException:
            self.fleet.close()
            raise

    def _upstreams(self) -> dict[str, int]:
        """Every link's name and the port of the listener it leads to."""
        out: dict[str, int] = {}
        brokers = self.layout.broker_nodes
        for b in brokers:
            out[link_name("client", b.id)] = b.client_port
        for a in brokers:
            for b in brokers:
                out[link_name(a.id, b.id)] = b.peer_ports[a.id]
        for a in self.layout.nodes:
            for c in self.layout.controller_nodes:
                if a.id != c.id:
                    out[controller_link(a.id, c)] = c.controller_port
        return out

    def addressing(self) -> dict[int, Addressing]:
        """What each node advertises and where it reaches the controllers."""
        out: dict[int, Addressing] = {}
        for n in self.layout.nodes:
            addr = Addressing()
            if n.is_broker:
                addr.client = self.addresses[link_name("client", n.id)]
                addr.from_peer = {
                    a.id: self.addresses[link_name(a.id, n.id)] for a in self.layout.broker_nodes
                }
            addr.voters = {
                c.id: self.addresses[controller_link(n.id, c)]
                for c in self.layout.controller_nodes
                if c.id != n.id
            }
            out[n.id] = addr
        return out

    def repoint(self) -> None:
        """Point every link at its listener again (a restarted node may have new ports)."""
        links = self.fleet.fleet.links
        for name, port in self._upstreams().items():
            link = links[name]
            if link.upstream != ("127.0.0.1", port):
                self.fleet.call(link.set_upstream, "127.0.0.1", port)


class KafkaHandle(ClusterHandle):
    launcher = "kafka"
    flavour = FLAVOUR
    capabilities = frozenset({KILL, PAUSE, RESUME, RESTART})

    def __init__(self, run_dir: Path, spec: ClusterSpec, cluster: KafkaCluster) -> None:
        super().__init__(run_dir, spec)
        self.cluster = cluster
        self.mesh: KafkaMesh | None = None

    @property
    def version(self) -> str | None:
        return self.cluster.release.version

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap()

    @property
    def nodes(self) -> list[NodeInfo]:
        out = []
        for n in self.cluster.layout.nodes:
            metrics = None
            if self.cluster.metrics and n.is_broker:
                metrics = f"http://127.0.0.1:{n.metrics_port}/metrics"
            out.append(
                NodeInfo(
                    id=n.id,
                    role=n.role,
                    host="127.0.0.1",
                    port=n.port,
                    advertised="{}:{}".format(*self.cluster.advertised(n)),
                    metrics_url=metrics,
                    pid=self.cluster.pids.get(n.id),
                )
            )
        return out

    def write_state(self) -> None:
        self.cluster.write_state(self.run_dir / STATE_FILE)

    def _kill(self, node_id: int) -> None:
        self.cluster.kill_node(node_id)
        self.write_state()

    def _pause(self, node_id: int) -> None:
        if not self.cluster.pause_node(node_id):
            raise LaunchError(f"node {node_id} is not running; nothing to pause")

    def _resume(self, node_id: int) -> None:
        if not self.cluster.resume_node(node_id):
            raise LaunchError(f"node {node_id} is not running; nothing to resume")

    def _restart(self, node_id: int) -> None:
        self.cluster.restart_node(node_id)
        if self.mesh is not None:
            self.mesh.repoint()
        self.write_state()

    def _stop(self) -> None:
        try:
            self.cluster.down()
        finally:
            self.write_state()

    def _describe_extra(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.cluster.data_dir),
            "state_file": str(self.run_dir / STATE_FILE),
            "mode": "kraft" if self.cluster.release.kraft else "zookeeper",
            "metrics_unavailable": dict(UNAVAILABLE) if self.cluster.metrics else {},
        }


class KafkaLauncher:
    name = "kafka"

    def __init__(self, version: str | None = None) -> None:
        self.version = version or DEFAULT_VERSION

    def start(self, spec: ClusterSpec, run_dir: Path) -> KafkaHandle:
        if spec.cpus is not None:
            raise LaunchError(
                f"cluster.cpus ({spec.cpus}): the kafka launcher does not place its JVMs on CPUs"
            )
        run_dir = run_dir.resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        cluster = KafkaCluster.prepare(
            run_dir / "cluster",
            self.version,
            spec.brokers,
            spec.coordinators,
            list(spec.settings),
        )
        handle = KafkaHandle(run_dir, spec, cluster)
        try:
            if spec.proxied:
                mesh = KafkaMesh(cluster.layout, run_dir, spec.seed)
                handle.mesh = mesh
                handle.fleet = mesh.fleet
                cluster.addressing = mesh.addressing()
            cluster.up()
            handle.write_state()
        except BaseException:
            handle.stop()
            raise
        return handle
