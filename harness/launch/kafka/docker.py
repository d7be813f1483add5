"""Apache Kafka's nodes in containers: ``--launcher docker --flavour apache-kafka``.

The same cluster as the ``kafka`` launcher (ids, roles, one listener per source of traffic,
controllers known by name: :mod:`.layout`), each node a container of the release's image
(:mod:`.image`, built on first use), started with testcontainers-python, its data
directory a bind mount of ``RUN_DIR/cluster/node-<id>`` (formatted on the host with the
release's StorageTool before the container starts; the container runs as the caller's
uid:gid).

Networks and proxies. Every node has a bridge network of its own
(``txnchaos-<run>-n<id>``): all its traffic to other nodes goes through the host-side
proxies, which listen on the gateway address of the *source* node's network, so each
link is told apart by where it arrives. A broker advertises ``FROM_<A>`` at the proxy
``n<A>->n<B>`` on A's gateway; every node's ``/etc/hosts`` (Docker's ``extra_hosts``)
sends each controller's name ``kafka-n<C>`` to its own gateway, where the proxy
``n<A>->n<C>`` listens on C's port. Clients on the host use the ``client->n<B>`` proxies on
127.0.0.1. In-container listener ports: CLIENT 9092, ``FROM_<A>`` 9100+A, metrics 9404,
CONTROLLER a port picked free on the host (the proxies listen on it); all are published on
127.0.0.1 with ports Docker picks (new ones after a restart: the proxies follow).

Node faults: ``docker kill``, ``pause``/``unpause``, restart (stop with a grace period,
start the same container), ``disconnect``/``connect`` of the node's network.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import probe
from ..base import (
    DISCONNECT,
    KILL,
    PAUSE,
    RECONNECT,
    RESTART,
    RESUME,
    TEAR,
    ClusterHandle,
    ClusterSpec,
    NodeInfo,
)
from ..docker import (
    LABEL_LAUNCHER,
    LABEL_RUN,
    STOP_GRACE_S,
    _client,
    _exit_on_sigterm,
    configure_testcontainers,
    remove_run,
)
from ..errors import LaunchError
from ..owner import this_harness
from .cluster import FLAVOUR, JVM_OPTIONS, LOG_OPTIONS, format_storage
from .image import ensure_image
from .launcher import KafkaMesh, lost_request_recovery_ms
from .layout import (
    KafkaLayout,
    KafkaNode,
    SegmentSize,
    controller_host,
    free_port,
    server_properties,
    split_settings,
)
from .metrics import EXPORTER_CONFIG, UNAVAILABLE
from .release import DEFAULT_VERSION, KafkaRelease, server_lib

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

log = logging.getLogger(__name__)

CLIENT_PORT = 9092
PEER_PORT_BASE = 9100
METRICS_PORT = 9404
DATA = "/data"
READY_TIMEOUT_S = 150.0


def container_ports(layout: KafkaLayout) -> None:
    """Give every node its in-container ports (a controller's: free on the host, where the
    proxies of the links to it listen on that port)."""
    taken: set[int] = set()
    for node in layout.nodes:
        if node.is_broker:
            node.client_port = CLIENT_PORT
            node.peer_ports = {b.id: PEER_PORT_BASE + b.id for b in layout.broker_nodes}
            node.metrics_port = METRICS_PORT
        if node.is_controller:
            node.controller_port = free_port(taken)
            taken.add(node.controller_port)


class _Container:
    def __init__(self, node: KafkaNode, name: str, data: Path, container: DockerContainer):
        self.node = node
        self.name = name
        self.data = data
        self.container = container
        self.published: dict[int, int] = {}  # container port -> host port (now)

    @property
    def id(self) -> str | None:
        try:
            return self.container.get_container_id()
        except Exception:
            return None

    def wrapped(self) -> Any:
        return self.container.get_wrapped_container()

    def status(self) -> str:
        c = self.wrapped()
        c.reload()
        return str(c.status)

    def read_ports(self) -> bool:
        """The published ports as Docker says now; False while it has none."""
        c = self.wrapped()
        c.reload()
        ports = c.attrs.get("NetworkSettings", {}).get("Ports") or {}
        found = {}
        for key, bindings in ports.items():
            if bindings:
                found[int(key.split("/")[0])] = int(bindings[0]["HostPort"])
        self.published = found
        return bool(found)


class KafkaDockerHandle(ClusterHandle):
    launcher = "docker"
    flavour = FLAVOUR
    capabilities = frozenset({KILL, PAUSE, RESUME, RESTART, DISCONNECT, RECONNECT, TEAR})

    def __init__(
        self, run_dir: Path, spec: ClusterSpec, run_id: str, release: KafkaRelease
    ) -> None:
        super().__init__(run_dir, spec)
        self.run_id = run_id
        self.release = release
        self.layout = KafkaLayout.plan(release.version, spec.brokers, spec.coordinators, [])
        self.layout.settings = list(spec.settings)
        container_ports(self.layout)
        self.image: str | None = None
        self.networks: dict[int, Network] = {}  # node id -> its own network
        self.gateways: dict[int, str] = {}
        self.mesh: KafkaMesh | None = None
        self._containers: dict[int, _Container] = {}
        self._client: Any = None
        self.segments = SegmentSize()

    @property
    def version(self) -> str | None:
        return self.release.version

    # ---- addresses ---------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        assert self.mesh is not None
        return ",".join(
            "{}:{}".format(*self.mesh.addresses[f"client->n{b.id}"])
            for b in self.layout.broker_nodes
        )

    @property
    def nodes(self) -> list[NodeInfo]:
        out = []
        for n in self.layout.nodes:
            c = self._containers.get(n.id)
            published = c.published if c else {}
            metrics = published.get(METRICS_PORT)
            advertised = None
            if self.mesh is not None and n.is_broker:
                advertised = "{}:{}".format(*self.mesh.addresses[f"client->n{n.id}"])
            out.append(
                NodeInfo(
                    id=n.id,
                    role=n.role,
                    host="127.0.0.1",
                    port=published.get(n.port, 0),
                    advertised=advertised,
                    metrics_url=f"http://127.0.0.1:{metrics}/metrics" if metrics else None,
                    container=c.id if c else None,
                )
            )
        return out

    def container_name(self, node_id: int) -> str:
        return f"txnchaos-{self.run_id}-kafka-n{node_id}"

    def _labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.run_id, LABEL_LAUNCHER: "docker", **this_harness().labels()}

    # ---- start ---------------------------------------------------------------------------
    def start(self) -> None:
        from testcontainers.core.network import Network

        self._client = _client()
        self.image = ensure_image(self._client, self.release)
        for node in self.layout.nodes:
            network = Network(docker_network_kw={"driver": "bridge", "labels": self._labels()})
            network.name = f"txnchaos-{self.run_id}-n{node.id}"
            self.networks[node.id] = network.create()
            self.gateways[node.id] = self._gateway(self.networks[node.id])
        self.mesh = KafkaMesh(
            self.layout,
            self.run_dir,
            self.spec.seed,
            upstream=self._upstream,
            source_host=lambda node_id: self.gateways[node_id],
        )
        self.fleet = self.mesh.fleet
        self.mesh.add_controller_links()
        addressing = self.mesh.addressing()
        lib = server_lib(self.release)
        self.segments = SegmentSize.plan(self.layout.settings, self.release.version, lib)
        for node in self.layout.nodes:
            directory = self.run_dir / "cluster" / f"node-{node.id}"
            (directory / "data").mkdir(parents=True, exist_ok=True)
            host_props = directory / "format.properties"
            host_props.write_text(
                server_properties(
                    self.layout,
                    node,
                    directory / "data",
                    addressing.get(node.id),
                    advertise_controller=self.release.controller_advertises,
                    segments=self.segments,
                )
            )
            format_storage(lib, self.layout, host_props)
            (directory / "server.properties").write_text(
                server_properties(
                    self.layout,
                    node,
                    Path(DATA) / "data",
                    addressing.get(node.id),
                    advertise_controller=self.release.controller_advertises,
                    bind="0.0.0.0",
                    segments=self.segments,
                )
            )
            (directory / "jmx-exporter.yaml").write_text(EXPORTER_CONFIG)
        self.layout.save(self.run_dir / "cluster")
        for node in self.layout.nodes:
            self._create(node).container.start()
        for node in self.layout.nodes:
            self._wait_ready(self._containers[node.id])

    def _gateway(self, network: Network) -> str:
        net = self._client.networks.get(network.id)
        for config in net.attrs.get("IPAM", {}).get("Config") or []:
            if config.get("Gateway"):
                return str(config["Gateway"])
        raise LaunchError(f"network {network.name} has no gateway address")

    def _upstream(self, node: KafkaNode, port: int) -> tuple[str, int] | None:
        c = self._containers.get(node.id)
        host_port = c.published.get(port) if c else None
        return ("127.0.0.1", host_port) if host_port else None

    def _command(self, node: KafkaNode) -> list[str]:
        cmd = [*JVM_OPTIONS, *LOG_OPTIONS[:3]]  # logs to the container's output
        if node.is_broker:
            agent = f"/opt/kafka/jmx_prometheus_javaagent.jar=0.0.0.0:{METRICS_PORT}"
            cmd.append(f"-javaagent:{agent}:{DATA}/jmx-exporter.yaml")
        return [*cmd, "-cp", "/opt/kafka/lib/*", "kafka.Kafka", f"{DATA}/server.properties"]

    def _create(self, node: KafkaNode) -> _Container:
        from testcontainers.core.container import DockerContainer

        assert self.image is not None
        name = self.container_name(node.id)
        data = self.run_dir / "cluster" / f"node-{node.id}"
        # each controller's name: this node's own gateway (its proxies), itself: loopback
        hosts = {
            controller_host(c.id): "127.0.0.1" if c.id == node.id else self.gateways[node.id]
            for c in self.layout.controller_nodes
        }
        container = (
            DockerContainer(self.image)
            .with_name(name)
            .with_network(self.networks[node.id])
            .with_volume_mapping(str(data), DATA, "rw")
            .with_command(self._command(node))
            .with_kwargs(
                labels=self._labels(),
                user=f"{os.getuid()}:{os.getgid()}",
                extra_hosts=hosts,
            )
        )
        ports = [node.client_port, node.controller_port, node.metrics_port]
        for port in [p for p in [*ports, *node.peer_ports.values()] if p]:
            container.ports[f"{port}/tcp"] = ("127.0.0.1",)  # type: ignore[assignment]
        c = _Container(node, name, data, container)
        self._containers[node.id] = c
        return c

    def _ready(self, c: _Container) -> bool:
        port = c.published.get(c.node.port)
        if port is None:
            return False
        if c.node.is_broker:
            seen = probe.brokers_seen(("127.0.0.1", port), timeout=2.0)
            return seen is not None and c.node.id in seen
        return probe.answers(("127.0.0.1", port), timeout=2.0)

    def _wait_ready(self, c: _Container) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        pointed = False
        while time.monotonic() < deadline:
            status = c.status()
            if status in ("exited", "dead"):
                raise LaunchError(
                    f"Apache Kafka node {c.node.id} (container {c.name}) exited during "
                    f"start-up:\n{self._logs(c)[-3000:]}"
                )
            if status == "running" and not pointed and c.read_ports():
                assert self.mesh is not None
                self.mesh.repoint({c.node.id})
                pointed = True
            if pointed and self._ready(c):
                return
            time.sleep(0.2)
        raise LaunchError(
            f"Apache Kafka node {c.node.id} (container {c.name}) did not serve within "
            f"{READY_TIMEOUT_S:.0f} s:\n{self._logs(c)[-3000:]}"
        )

    def _logs(self, c: _Container) -> str:
        try:
            out, err = c.container.get_logs()
        except Exception as exc:
            return f"(no logs: {exc})"
        return (out + err).decode(errors="replace")

    # ---- node faults ---------------------------------------------------------------------
    def _container(self, node_id: int) -> _Container:
        try:
            return self._containers[node_id]
        except KeyError:
            raise LaunchError(f"node {node_id} has no container") from None

    def _kill(self, node_id: int) -> None:
        c = self._container(node_id)
        if c.status() in ("running", "paused"):
            c.wrapped().kill()
        c.published = {}

    def _pause(self, node_id: int) -> None:
        c = self._container(node_id)
        if c.status() != "running":
            raise LaunchError(f"node {node_id} is not running; nothing to pause")
        c.wrapped().pause()

    def _resume(self, node_id: int) -> None:
        c = self._container(node_id)
        if c.status() != "paused":
            raise LaunchError(f"node {node_id} is not paused")
        c.wrapped().unpause()

    def _node_dir(self, node_id: int) -> Path:
        return self.run_dir / "cluster" / f"node-{node_id}" / "data"  # bind-mounted log.dirs

    def _restart(self, node_id: int) -> None:
        c = self._container(node_id)
        container = c.wrapped()
        status = c.status()
        if status == "paused":
            container.unpause()
        if status in ("running", "paused"):
            container.stop(timeout=STOP_GRACE_S)
        c.published = {}
        container.start()
        self._wait_ready(c)

    def _disconnect(self, node_id: int) -> None:
        c = self._container(node_id)
        self._client.networks.get(self.networks[node_id].id).disconnect(c.id)
        c.published = {}

    def _reconnect(self, node_id: int) -> None:
        c = self._container(node_id)
        assert self.mesh is not None
        self._client.networks.get(self.networks[node_id].id).connect(c.id)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not c.read_ports():  # published ports come back with the endpoint
            if time.monotonic() > deadline:
                raise LaunchError(f"node {node_id}: no published port after reconnecting")
            time.sleep(0.1)
        self.mesh.repoint({node_id})

    # ---- teardown ------------------------------------------------------------------------
    def _stop(self) -> None:
        atexit.unregister(self._atexit)
        for c in self._containers.values():
            if c.id is None:
                continue
            with contextlib.suppress(Exception):
                (c.data / "node.log").write_text(self._logs(c))
            with contextlib.suppress(Exception):
                container = c.wrapped()
                container.reload()
                if container.status == "paused":
                    container.unpause()
                if container.status in ("running", "paused"):
                    container.stop(timeout=STOP_GRACE_S)
        for c in self._containers.values():
            with contextlib.suppress(Exception):
                c.container.stop()
        for network in self.networks.values():
            with contextlib.suppress(Exception):
                network.remove()
        with contextlib.suppress(Exception):
            remove_run(self.run_id, self._client)

    def _atexit(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    def _describe_extra(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "image": self.image,
            "networks": {n: net.name for n, net in self.networks.items()},
            "gateways": dict(self.gateways),
            "data_dir": str(self.run_dir / "cluster"),
            "containers": {c.node.id: c.name for c in self._containers.values()},
            "metrics_unavailable": dict(UNAVAILABLE),
            "lost_request_recovery_ms": lost_request_recovery_ms(self.layout.settings),
            "adjusted_settings": [self.segments.note] if self.segments.note else [],
        }

    def topic_configs(self) -> dict[str, str]:
        return dict(self.segments.topic_configs)


class KafkaDockerLauncher:
    name = "docker"

    def __init__(self, version: str | None = None, docker_host: str | None = None) -> None:
        self.release = KafkaRelease.parse(version or DEFAULT_VERSION)
        self.docker_host = docker_host

    def start(self, spec: ClusterSpec, run_dir: Path) -> KafkaDockerHandle:
        if spec.cpus is not None:
            raise LaunchError("cluster.cpus: the Apache Kafka containers are not placed on CPUs")
        if not self.release.kraft:
            raise LaunchError(
                f"Apache Kafka {self.release} needs ZooKeeper: the docker flavour runs KRaft "
                "releases only (use --launcher kafka)"
            )
        split_settings(list(spec.settings))
        if not spec.proxied:
            raise LaunchError("the Apache Kafka containers are always proxied (proxied: true)")
        configure_testcontainers(self.docker_host)
        run_dir = run_dir.resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        handle = KafkaDockerHandle(run_dir, spec, uuid.uuid4().hex[:10], self.release)
        atexit.register(handle._atexit)
        _exit_on_sigterm()
        try:
            handle.start()
        except BaseException:
            handle.stop()
            raise
        return handle
