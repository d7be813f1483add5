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
  and fetches), through C's name ``kafka-n<C>``, which A's own hosts file resolves to the
  address this proxy listens on (:mod:`.layout`: KRaft followers fetch from the endpoint
  the leader advertises, the same for every node, so a per-node address has to come from
  the name's resolution).

Node faults (``kill``, ``pause``/``resume``, ``restart``) act on the JVMs by the PIDs this
launcher started. The nodes' Prometheus endpoints are the JMX exporter's (:mod:`.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...faults.proxy.thread import FleetThread
from ..base import (
    KILL,
    PAUSE,
    RESTART,
    RESUME,
    TEAR,
    ClusterHandle,
    ClusterSpec,
    NodeInfo,
    link_name,
)
from ..errors import LaunchError
from .cluster import FLAVOUR, KafkaCluster, node_dir
from .layout import Addressing, KafkaLayout, KafkaNode, source_ip
from .metrics import UNAVAILABLE
from .release import DEFAULT_VERSION

log = logging.getLogger(__name__)

STATE_FILE = "cluster-state.json"


#: (node, its listener port) -> (host, port) that reaches it from here, or None (not now)
Upstream = Callable[[KafkaNode, int], "tuple[str, int] | None"]


def controller_link(source: int, controller: KafkaNode) -> str:
    """The link on which node ``source`` reaches controller ``controller``."""
    name = link_name(source, controller.id)
    return f"{name}.controller" if controller.is_broker else name


class KafkaMesh:
    """The proxies of one Kafka cluster: links by name, each to one listener of a node.

    Made in two steps around the picking of the nodes' ports: the client and broker links
    first (ports the kernel picks, before the nodes' are picked, so none takes a port a
    node was given), then :meth:`add_controller_links`, which must listen on each
    controller's own port, on an address of each source (:func:`~.layout.source_ip`, or
    ``source_host`` of it: a container's network gateway)."""

    def __init__(
        self,
        layout: KafkaLayout,
        run_dir: Path,
        seed: int | str | None,
        *,
        host: str = "127.0.0.1",
        upstream: Upstream | None = None,
        source_host: Callable[[int], str] = source_ip,
    ) -> None:
        """``host``: where the client links listen; ``upstream`` maps (node, listener port)
        to where that listener is reached from here (default: 127.0.0.1 and the port;
        containers: their published port); ``source_host``: where the links of a source
        node to other nodes listen (its own address: the node reaches them there)."""
        self.layout = layout
        self.upstream: Upstream = upstream or (lambda node, port: ("127.0.0.1", port))
        self.source_host = source_host
        self.fleet = FleetThread(fault_log=run_dir, seed=seed)
        self.fleet.fleet.host = host
        self.addresses: dict[str, tuple[str, int]] = {}
        try:
            for b in layout.broker_nodes:
                name = link_name("client", b.id)
                self.addresses[name] = self.fleet.add_link(name, None).address
            for a in layout.broker_nodes:
                for b in layout.broker_nodes:
                    name = link_name(a.id, b.id)
                    link = self.fleet.add_link(name, None, host=self.source_host(a.id))
                    self.addresses[name] = link.address
        except BaseException:
            self.fleet.close()
            raise

    def _controller_links(self) -> dict[str, tuple[int, KafkaNode]]:
        """Each link to a controller: its name, source node and controller."""
        return {
            controller_link(a.id, c): (a.id, c)
            for a in self.layout.nodes
            for c in self.layout.controller_nodes
            if a.id != c.id
        }

    def add_controller_links(self) -> None:
        """The links to the controllers, once their ports are known: the proxy of A's link
        to C listens on A's own address and C's port, where A's hosts file sends C's name.
        A controller that got another port since (one was taken before its JVM bound it)
        gets its links again on the new one."""
        for name, (source, c) in self._controller_links().items():
            if name in self.addresses and self.addresses[name][1] != c.controller_port:
                self.fleet.remove_link(name)
                del self.addresses[name]
            if name in self.addresses:
                continue
            host = self.source_host(source)
            try:
                link = self.fleet.add_link(name, None, host=host, port=c.controller_port)
            except OSError as exc:
                raise LaunchError(
                    f"cannot listen on {host}:{c.controller_port} for {name}: {exc}"
                ) from exc
            self.addresses[name] = link.address

    def _upstreams(self) -> dict[str, tuple[KafkaNode, int]]:
        """Every link's name, the node it leads to and that node's listener port."""
        out: dict[str, tuple[KafkaNode, int]] = {}
        brokers = self.layout.broker_nodes
        for b in brokers:
            out[link_name("client", b.id)] = (b, b.client_port)
        for a in brokers:
            for b in brokers:
                out[link_name(a.id, b.id)] = (b, b.peer_ports.get(a.id, 0))
        for name, (_source, c) in self._controller_links().items():
            out[name] = (c, c.controller_port)
        return out

    def addressing(self) -> dict[int, Addressing]:
        """What each node advertises and where its names of the controllers lead."""
        out: dict[int, Addressing] = {}
        for n in self.layout.nodes:
            addr = Addressing()
            if n.is_broker:
                addr.client = self.addresses[link_name("client", n.id)]
                addr.from_peer = {
                    a.id: self.addresses[link_name(a.id, n.id)] for a in self.layout.broker_nodes
                }
            addr.controllers = {
                c.id: self.source_host(n.id) for c in self.layout.controller_nodes if c.id != n.id
            }
            out[n.id] = addr
        return out

    def follow_ports(self) -> None:
        """After nodes got new ports: the controllers' links on their new ports, and every
        link pointed at its listener."""
        self.add_controller_links()
        self.repoint()

    def repoint(self, nodes: set[int] | None = None) -> None:
        """Point every link (leading to ``nodes``; default all) at its listener, again when
        a node got new ports; a listener not reachable now (0, None) is left as it was."""
        links = self.fleet.fleet.links
        for name, (node, port) in self._upstreams().items():
            if name not in links or not port or (nodes is not None and node.id not in nodes):
                continue
            where = self.upstream(node, port)
            if where is not None and links[name].upstream != where:
                self.fleet.call(links[name].set_upstream, *where)


#: Kafka's defaults of the settings that bound how long a node waits on a silent peer
RECOVERY_SETTINGS = {"request.timeout.ms": 30_000, "replica.lag.time.max.ms": 30_000}


def lost_request_recovery_ms(settings: list[str]) -> int:
    """How long a node may wait on a request lost on a live connection before it retries
    (the inter-broker clients' request.timeout.ms; a follower whose fetch answer was lost is
    dropped from the ISR after replica.lag.time.max.ms): the LSO-stall rule's allowance for
    such a loss (analysis/reference/hanging.py)."""
    given = dict(pair.partition("=")[::2] for pair in settings)
    out = 0
    for key, default in RECOVERY_SETTINGS.items():
        try:
            out = max(out, int(given.get(key, default)))
        except ValueError:
            out = max(out, default)
    return out


class KafkaHandle(ClusterHandle):
    launcher = "kafka"
    flavour = FLAVOUR
    capabilities = frozenset({KILL, PAUSE, RESUME, RESTART, TEAR})

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

    def _node_dir(self, node_id: int) -> Path:
        return node_dir(self.cluster.data_dir, node_id) / "data"  # the node's log.dirs

    def _restart(self, node_id: int) -> None:
        self.cluster.restart_node(node_id)  # new ports, if any: on_ports_changed repoints
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
            "lost_request_recovery_ms": lost_request_recovery_ms(self.cluster.layout.settings),
            "adjusted_settings": [note] if (note := self.cluster.segments.note) else [],
        }

    def topic_configs(self) -> dict[str, str]:
        return dict(self.cluster.segments.topic_configs)


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
            ports=not spec.proxied,
        )
        handle = KafkaHandle(run_dir, spec, cluster)
        try:
            if spec.proxied:
                mesh = KafkaMesh(cluster.layout, run_dir, spec.seed)
                handle.mesh = mesh
                handle.fleet = mesh.fleet
                cluster.pick_ports()
                mesh.add_controller_links()
                mesh.repoint()
                cluster.addressing = mesh.addressing()
                cluster.on_ports_changed = mesh.follow_ports
            cluster.up()
            handle.write_state()
        except BaseException:
            handle.stop()
            raise
        return handle
