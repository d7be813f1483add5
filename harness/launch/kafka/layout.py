"""An Apache Kafka cluster's plan: node ids and roles, ports, and each node's
``server.properties``.

Roles. A scenario says ``brokers: N, coordinators: M``. Kafka has brokers and KRaft
controllers; its transaction and group coordinators live on the brokers. The mapping:

* brokers keep ids ``1..N`` (as the project's brokers do);
* ``M >= 1``: M dedicated KRaft controllers get ids ``1001..1000+M`` (where the project's
  coordinator nodes live), so ``kill node 1001`` and ``n1->n1001`` still name the
  controller side of the cluster;
* ``M == 0``: broker 1 is also the (only) controller (``process.roles=broker,controller``),
  as the project's broker 1 then hosts the coordinator.

Ports. Every port is picked free on 127.0.0.1 when the cluster is planned and kept for
restarts. A broker has one listener per *source* of traffic, so that the harness can put
a proxy on every link:

* ``CLIENT``: clients (advertised: the ``client->n<B>`` proxy when proxied);
* ``FROM_<A>`` for every broker A (itself included): broker A reaches this broker there;
  A runs with ``inter.broker.listener.name=FROM_<A>``, so its replica fetchers,
  transaction marker sender and verification requests use this broker's ``FROM_<A>``
  advertised address, the ``n<A>->n<B>`` proxy;
* ``CONTROLLER`` (controllers only), advertised as ``kafka-n<C>:<port>``: every node lists
  the controllers by those names in ``controller.quorum.voters`` and resolves them with a
  hosts file of its own (:func:`controller_host`), to its own proxies ``n<A>->n<C>``
  (``n<A>->n<C>.controller`` when C is also a broker, in combined mode), which listen on an
  address of their source's (:func:`source_ip`) and the controller's own port.

Settings. The scenario's settings are Kafka's own names, written to every node's
``server.properties``; ``transaction.version`` goes to the storage format instead
(``--feature``). What the launcher owns (listeners, ids, directories) and the project's
own settings (``txnchaos.*``) are refused with a line naming them.
"""

from __future__ import annotations

import json
import os
import socket
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LaunchError

CONTROLLER_ID_BASE = 1001
LAYOUT_FILE = "kafka-cluster.json"
#: a setting that is a feature level given to the storage format, not a server property
TRANSACTION_VERSION = "transaction.version"

#: server.properties keys the launcher writes itself
OWNED = frozenset(
    {
        "node.id",
        "broker.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "controller.listener.names",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "log.dirs",
        "log.dir",
        "zookeeper.connect",
        "metadata.log.dir",
    }
)
#: the project's settings that have no Apache Kafka counterpart, with what to do instead
NOT_KAFKA = {
    "listener.security.protocol": "the kafka launcher runs PLAINTEXT listeners only",
    "sasl.jaas.config": "the kafka launcher runs PLAINTEXT listeners only",
    "sasl.enabled.mechanisms": "the kafka launcher runs PLAINTEXT listeners only",
}


def settings_problem(name: str) -> str | None:
    """Why ``name`` cannot be set on an Apache Kafka node, or None."""
    if name.startswith("txnchaos."):
        what = "a bug switch" if name.startswith("txnchaos.bug.") else "a setting"
        return (
            f"{name} is {what} of the project's own cluster; Apache Kafka has no such "
            "setting (the local and docker launchers run the project's cluster)"
        )
    if name in OWNED:
        return f"{name} is set by the kafka launcher itself (ids, listeners, directories)"
    if name in NOT_KAFKA:
        return f"{name}: {NOT_KAFKA[name]}"
    return None


def split_settings(pairs: list[str]) -> tuple[dict[str, str], int | None]:
    """``KEY=VALUE`` pairs -> (server properties, transaction.version or None); a
    :class:`LaunchError` naming the first setting Kafka cannot take."""
    props: dict[str, str] = {}
    tv: int | None = None
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise LaunchError(f"expected KEY=VALUE, got {pair!r}")
        problem = settings_problem(name)
        if problem:
            raise LaunchError(problem)
        if name == TRANSACTION_VERSION:
            if value.strip() not in ("0", "1", "2"):
                raise LaunchError(f"transaction.version: expected 0, 1 or 2, got {value!r}")
            tv = int(value)
            continue
        props[name] = value
    return props, tv


#: Apache Kafka 4.0's smallest ``log.segment.bytes`` (KIP-1030; earlier releases took 14)
MIN_SEGMENT_BYTES = 1 << 20
#: the topic setting with no such minimum that later 4.x releases have for tests
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"


@dataclass(frozen=True)
class SegmentSize:
    """How a scenario's ``log.segment.bytes`` reaches an Apache Kafka release.

    Releases from 4.0 refuse a ``log.segment.bytes`` under 1 MiB, which the project's mixes
    use (segments of 2 KiB, so that transactions span segments and recovery meets rolled
    segments). Where the release has the topic setting ``internal.segment.bytes`` the size
    goes there, on every topic the harness creates, and leaves the server properties;
    otherwise the server gets Kafka's smallest size. Either way ``note`` says so."""

    server: Mapping[str, str | None] = field(default_factory=dict)  # None: left out
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    note: str | None = None

    @classmethod
    def plan(cls, settings: list[str], version: str, lib: Path | None) -> SegmentSize:
        server, _tv = split_settings(settings)
        value = server.get("log.segment.bytes")
        major = int(version.split(".", 1)[0]) if version[:1].isdigit() else 0
        if value is None or major < 4:
            return cls()
        try:
            size = int(value)
        except ValueError:
            return cls()  # Kafka's own validation names it
        if size >= MIN_SEGMENT_BYTES:
            return cls()
        if lib is not None and has_internal_segment_bytes(lib):
            return cls(
                server={"log.segment.bytes": None},
                topic_configs={INTERNAL_SEGMENT_BYTES: str(size)},
                note=(
                    f"log.segment.bytes={size}: Apache Kafka {version} refuses less than "
                    f"{MIN_SEGMENT_BYTES}; set as the topic setting {INTERNAL_SEGMENT_BYTES}="
                    f"{size} on every topic the run creates instead"
                ),
            )
        return cls(
            server={"log.segment.bytes": str(MIN_SEGMENT_BYTES)},
            note=(
                f"log.segment.bytes={size}: Apache Kafka {version} refuses less than "
                f"{MIN_SEGMENT_BYTES} and has no {INTERNAL_SEGMENT_BYTES}; its segments roll "
                f"at {MIN_SEGMENT_BYTES} bytes"
            ),
        )


def has_internal_segment_bytes(lib: Path) -> bool:
    """Whether the release in ``lib`` defines the topic setting ``internal.segment.bytes``."""
    name = "org/apache/kafka/storage/internals/log/LogConfig.class"
    for jar in sorted(lib.glob("kafka-storage-*.jar")):
        try:
            with zipfile.ZipFile(jar) as z:
                return INTERNAL_SEGMENT_BYTES.encode() in z.read(name)
        except (KeyError, OSError, zipfile.BadZipFile):
            continue
    return False


@dataclass
class KafkaNode:
    """One JVM: its id, roles and ports on 127.0.0.1 (0: not picked yet)."""

    id: int
    roles: list[str]  # "broker" and/or "controller"
    client_port: int = 0  # CLIENT listener (brokers)
    peer_ports: dict[int, int] = field(default_factory=dict)  # FROM_<source> listeners
    controller_port: int = 0  # CONTROLLER listener (controllers)
    metrics_port: int = 0  # the JMX exporter's HTTP endpoint (brokers)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def role(self) -> str:
        """As :class:`~..base.NodeInfo` says it: broker, controller or broker+controller."""
        return "+".join(self.roles)

    @property
    def port(self) -> int:
        """The node's main port: clients' for a broker, the controller's otherwise."""
        return self.client_port if self.is_broker else self.controller_port

    def all_ports(self) -> list[int]:
        ports = [self.client_port, self.controller_port, self.metrics_port]
        return [p for p in [*ports, *self.peer_ports.values()] if p]


@dataclass
class Addressing:
    """Where one node's traffic goes (proxies when proxied; None: the real address).

    ``client``: what this broker advertises on CLIENT; ``from_peer[A]``: what it advertises
    on ``FROM_<A>``; ``controllers``: the address this node's name of each controller
    (:func:`controller_host`) resolves to in its own hosts file (default: 127.0.0.1)."""

    client: tuple[str, int] | None = None
    from_peer: dict[int, tuple[str, int]] = field(default_factory=dict)
    controllers: dict[int, str] = field(default_factory=dict)


def controller_host(controller_id: int) -> str:
    """The name every node knows controller ``controller_id`` by (voters, its advertised
    CONTROLLER listener). KRaft's followers fetch from the address the leader advertises
    (KIP-853's leader endpoints), one for all of them; each node resolves this name through
    a hosts file of its own (``-Djdk.net.hosts.file``), so each reaches the controller at an
    address of its own: the proxy of its own link to that controller."""
    return f"kafka-n{controller_id}"


def source_ip(node_id: int) -> str:
    """The loopback address on which the proxies of node ``node_id``'s links to the
    controllers listen (127.1.x.y; every 127/8 address is the loopback on Linux)."""
    return f"127.1.{node_id // 256 % 256}.{node_id % 256}"


def hosts_file(layout: KafkaLayout, node: KafkaNode, addressing: Addressing | None) -> str:
    """The hosts file of ``node``: each controller's name, to the node's own address for it."""
    addr = addressing or Addressing()
    lines = ["127.0.0.1 localhost"]
    for c in layout.controller_nodes:
        ip = "127.0.0.1" if c.id == node.id else addr.controllers.get(c.id, "127.0.0.1")
        lines.append(f"{ip} {controller_host(c.id)}")
    return "\n".join(lines) + "\n"


@dataclass
class KafkaLayout:
    """The plan of a cluster, saved as ``DATA_DIR/kafka-cluster.json`` for restarts."""

    version: str
    brokers: int
    controllers: int  # dedicated controllers (0: broker 1 is also the controller)
    cluster_id: str = ""
    settings: list[str] = field(default_factory=list)
    nodes: list[KafkaNode] = field(default_factory=list)
    zookeeper_port: int = 0  # releases before KRaft

    @classmethod
    def plan(cls, version: str, brokers: int, controllers: int, settings: list[str]) -> KafkaLayout:
        if brokers < 1:
            raise LaunchError("a cluster needs at least 1 broker")
        if controllers < 0:
            raise LaunchError("coordinators (controllers) must be 0 or more")
        nodes = [KafkaNode(CONTROLLER_ID_BASE + i, ["controller"]) for i in range(controllers)]
        for b in range(1, brokers + 1):
            roles = ["broker", "controller"] if controllers == 0 and b == 1 else ["broker"]
            nodes.append(KafkaNode(b, roles))
        return cls(version, brokers, controllers, settings=list(settings), nodes=nodes)

    # ---- nodes ---------------------------------------------------------------------
    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        ids = [n.id for n in self.nodes]
        raise LaunchError(f"no node {node_id} in this cluster (nodes: {ids})")

    @property
    def broker_nodes(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controller_nodes(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_controller]

    def pick_ports(self, node: KafkaNode, *, fresh: bool = False) -> None:
        """Give ``node`` free ports where it has none (``fresh``: new ones for all)."""
        taken = {p for n in self.nodes if n is not node for p in n.all_ports()}

        def pick(current: int) -> int:
            return current if current and not fresh else free_port(taken)

        if node.is_broker:
            node.client_port = pick(node.client_port)
            node.peer_ports = {b.id: pick(node.peer_ports.get(b.id, 0)) for b in self.broker_nodes}
            node.metrics_port = pick(node.metrics_port)
        if node.is_controller:
            node.controller_port = pick(node.controller_port)

    # ---- persistence ---------------------------------------------------------------
    def save(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LAYOUT_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, data_dir: Path) -> KafkaLayout | None:
        path = data_dir / LAYOUT_FILE
        if not path.exists():
            return None
        try:
            doc = json.loads(path.read_text())
            nodes = [
                KafkaNode(
                    id=n["id"],
                    roles=list(n["roles"]),
                    client_port=n["client_port"],
                    peer_ports={int(k): v for k, v in n["peer_ports"].items()},
                    controller_port=n["controller_port"],
                    metrics_port=n["metrics_port"],
                )
                for n in doc["nodes"]
            ]
            return cls(
                version=doc["version"],
                brokers=doc["brokers"],
                controllers=doc["controllers"],
                cluster_id=doc.get("cluster_id", ""),
                settings=list(doc.get("settings", [])),
                nodes=nodes,
                zookeeper_port=doc.get("zookeeper_port", 0),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LaunchError(f"{path} is not a valid Apache Kafka cluster layout: {exc}") from exc


def free_port(taken: set[int] | None = None) -> int:
    """A port nothing listens on now (the kernel's pick), not among ``taken``."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not taken or port not in taken:
            return port
    raise LaunchError("no free port found on 127.0.0.1")


def _hostport(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


def server_properties(
    layout: KafkaLayout,
    node: KafkaNode,
    data: Path,
    addressing: Addressing | None,
    *,
    kraft: bool = True,
    advertise_controller: bool = True,
    bind: str = "127.0.0.1",
    segments: SegmentSize | None = None,
) -> str:
    """The ``server.properties`` of ``node`` (``data``: its log directory; ``bind``: the
    address its listeners bind, 0.0.0.0 in a container). ``advertise_controller``: whether
    a controller advertises its listener (KIP-853, Kafka 3.9 and later; earlier releases
    refuse it, and their followers fetch from the voters' addresses, the same names)."""
    addr = addressing or Addressing()
    props: dict[str, Any] = {}
    listeners: list[str] = []
    advertised: list[str] = []
    protocols: list[str] = []
    if node.is_broker:
        listeners.append(f"CLIENT://{bind}:{node.client_port}")
        advertised.append(f"CLIENT://{_hostport(addr.client or ('127.0.0.1', node.client_port))}")
        protocols.append("CLIENT:PLAINTEXT")
        for source, port in sorted(node.peer_ports.items()):
            name = f"FROM_{source}"
            listeners.append(f"{name}://{bind}:{port}")
            shown = addr.from_peer.get(source) or ("127.0.0.1", port)
            advertised.append(f"{name}://{_hostport(shown)}")
            protocols.append(f"{name}:PLAINTEXT")
        props["inter.broker.listener.name"] = f"FROM_{node.id}"
    if kraft:
        roles = ",".join(r for r in ("broker", "controller") if r in node.roles)
        props["process.roles"] = roles
        props["node.id"] = node.id
        if node.is_controller:
            listeners.append(f"CONTROLLER://{bind}:{node.controller_port}")
            if advertise_controller:
                advertised.append(f"CONTROLLER://{controller_host(node.id)}:{node.controller_port}")
        protocols.append("CONTROLLER:PLAINTEXT")  # brokers too: they reach controllers there
        voters = [
            f"{c.id}@{controller_host(c.id)}:{c.controller_port}" for c in layout.controller_nodes
        ]
        props["controller.quorum.voters"] = ",".join(voters)
        props["controller.listener.names"] = "CONTROLLER"
    else:
        props["broker.id"] = node.id
        props["zookeeper.connect"] = f"127.0.0.1:{layout.zookeeper_port}"
    props["listeners"] = ",".join(listeners)
    if advertised:
        props["advertised.listeners"] = ",".join(advertised)
    props["listener.security.protocol.map"] = ",".join(protocols)
    props["log.dirs"] = str(data)
    # Defaults fitting a small test cluster (a scenario's settings override them).
    replicas = min(3, layout.brokers)
    defaults: dict[str, Any] = {
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 100,  # the project's nodes' default
    }
    server, _tv = split_settings(layout.settings)
    merged: dict[str, Any] = {**props, **defaults, **server}
    for key, override in (segments.server if segments else {}).items():
        if override is None:
            merged.pop(key, None)
        else:
            merged[key] = override
    out = [f"# txnchaos: node {node.id} ({node.role}) of Apache Kafka {layout.version}"]
    if segments is not None and segments.note:
        out.append(f"# {segments.note}")
    for key, value in merged.items():
        out.append(f"{key}={_render(value)}")
    return "\n".join(out) + "\n"


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).replace("\n", " ")
