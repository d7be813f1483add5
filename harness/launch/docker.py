"""The ``docker`` launcher: the project's nodes as containers of the node image.

Containers are started with testcontainers-python (``testcontainers`` package) from the
image that ``scripts/build-image.sh`` builds from the project's Dockerfile
(``txnchaos-node:dev`` unless ``image=``/``TXNCHAOS_NODE_IMAGE`` say otherwise), on a
user-defined bridge network ``txnchaos-<run>`` made for the run. Each node's data
directory is a bind mount of ``RUN_DIR/cluster/node-<id>`` (the container runs with the
caller's uid:gid), so a restarted container finds its data and the run directory keeps
it afterwards; container logs are saved to ``node-<id>/node.log`` when the cluster stops.

Addressing. A node must know the address it advertises before it starts, but Docker only
picks a published host port when the container starts (and picks a new one on every
restart or network reconnect). So clients never use published ports directly: the
launcher puts a host-side proxy in front of every container (``client->n<id>``, the
:class:`~.proxied.ProxyMesh`), made before any container starts; the node advertises
that proxy's address, and the proxy's upstream is set (and reset after each
restart/reconnect) to ``127.0.0.1:<published port>``. This is always on: it is what makes
the advertised address stable. ``ClusterSpec.proxied`` decides node-to-node traffic:

* ``proxied=False``: nodes reach each other over the network by container name
  (``--controller txnchaos-<run>-n<C>:9092``, ``--peer B=txnchaos-<run>-n<B>:9092``);
* ``proxied=True``: every ordered pair of nodes gets a link proxy ``n<A>->n<B>`` on the
  host, and the whole mesh listens on the network's gateway address (reachable from the
  host and from the containers), so nodes reach peers and the controller through it.
  Clients on the host then use the gateway address too.

Node faults: ``docker kill`` (SIGKILL), ``docker pause``/``unpause``, restart (stop with
a grace period, start the same container: same data, same command line), and
``docker network disconnect``/``connect``.

Environment: ``TESTCONTAINERS_RYUK_DISABLED=true`` and
``TESTCONTAINERS_CONNECTION_MODE=docker_host`` are set (no reaper image is available
offline; ``docker_watchdog`` says why a host process does the reaper's job instead);
``DOCKER_HOST`` comes from the ``docker_host`` option, the environment, or the
repository's ``var/docker/env`` (``scripts/bootstrap.sh --docker``). Every container and
the network carry ``org.txnchaos.run=<run id>`` and their harness (``owner.py``: host, PID
and its start time) and are removed by :meth:`stop`, at interpreter exit (including
Ctrl-C), on SIGTERM when the process has no handler of its own, by the run's watchdog
when the harness dies any other way (``kill -9``), and by ``txnchaos cleanup`` if even the
watchdog is gone; :func:`remove_run` removes the leftovers of a run by label.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
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
from .docker_watchdog import Watchdog
from .errors import LaunchError
from .local import ClusterLayout, NodeSpec, node_dir, require_usable_cpus
from .owner import this_harness
from .proxied import ProxyMesh

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "txnchaos-node:dev"
NODE_PORT = 9092
METRICS_PORT = 9100
DATA_IN_CONTAINER = "/data"
LABEL_RUN = "org.txnchaos.run"
LABEL_LAUNCHER = "org.txnchaos.launcher"
READY_TIMEOUT_S = 90.0
STOP_GRACE_S = 10
REPO = Path(__file__).resolve().parents[2]


def docker_host(explicit: str | None = None) -> str | None:
    """DOCKER_HOST: the option, the environment, else the repository's var/docker/env."""
    if explicit:
        return explicit
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    envfile = REPO / "var" / "docker" / "env"
    if envfile.is_file():
        match = re.search(r"DOCKER_HOST=(\S+)", envfile.read_text())
        if match:
            return match.group(1).strip("'\"")
    return None


def configure_testcontainers(host: str | None = None) -> None:
    """Environment and settings testcontainers needs here (before any container starts)."""
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    os.environ["TESTCONTAINERS_CONNECTION_MODE"] = "docker_host"
    resolved = docker_host(host)
    if resolved:
        os.environ["DOCKER_HOST"] = resolved
    try:
        from testcontainers.core.config import ConnectionMode, testcontainers_config
    except ImportError as exc:
        raise LaunchError(
            "the docker launcher needs testcontainers-python (pip install testcontainers)"
        ) from exc
    # The config object reads the environment when first imported; it may predate us.
    testcontainers_config.ryuk_disabled = True
    testcontainers_config.connection_mode_override = ConnectionMode.docker_host


def _client() -> Any:
    from testcontainers.core.docker_client import DockerClient

    return DockerClient().client


def remove_run(run_id: str, client: Any = None) -> int:
    """Remove every container and network labelled with ``run_id``; returns how many."""
    client = client or _client()
    removed = 0
    label = f"{LABEL_RUN}={run_id}"
    for container in client.containers.list(all=True, filters={"label": label}):
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)
            removed += 1
    for network in client.networks.list(filters={"label": label}):
        with contextlib.suppress(Exception):
            network.remove()
            removed += 1
    return removed


_SIGTERM_INSTALLED = False


def _exit_on_sigterm() -> None:
    """Make SIGTERM unwind (finally blocks, atexit) when nobody else handles it."""
    global _SIGTERM_INSTALLED
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def _raise(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _raise)
    _SIGTERM_INSTALLED = True


class _Node:
    """One node's container and what the launcher knows about it."""

    def __init__(self, spec: NodeSpec, name: str, data: Path, container: DockerContainer) -> None:
        self.spec = spec
        self.name = name
        self.data = data
        self.container = container
        self.port: int | None = None
        self.metrics_port: int | None = None
        self.disconnected = False

    @property
    def id(self) -> str | None:
        try:
            return self.container.get_container_id()
        except Exception:  # not created (yet)
            return None

    def wrapped(self) -> Any:
        return self.container.get_wrapped_container()

    def status(self) -> str:
        c = self.wrapped()
        c.reload()
        return str(c.status)

    def published(self, port: int) -> int | None:
        c = self.wrapped()
        c.reload()
        bindings = (c.attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{port}/tcp")
        if not bindings:
            return None
        return int(bindings[0]["HostPort"])


class DockerHandle(ClusterHandle):
    launcher = "docker"
    capabilities = frozenset({KILL, PAUSE, RESUME, RESTART, DISCONNECT, RECONNECT, TEAR})

    def __init__(self, run_dir: Path, spec: ClusterSpec, run_id: str, image: str) -> None:
        super().__init__(run_dir, spec)
        self.run_id = run_id
        self.image = image
        self.layout = ClusterLayout.plan(spec.brokers, spec.coordinators, list(spec.settings))
        self.network: Network | None = None
        self.gateway: str | None = None
        self.mesh: ProxyMesh | None = None
        self._nodes: dict[int, _Node] = {}
        self._client: Any = None
        self.watchdog: Watchdog | None = None

    # ---- addresses ---------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        assert self.mesh is not None
        return self.mesh.bootstrap(n.id for n in self.layout.nodes if "broker" in n.roles)

    @property
    def nodes(self) -> list[NodeInfo]:
        out = []
        for spec in self.layout.nodes:
            node = self._nodes.get(spec.id)
            advertised = None
            if self.mesh is not None:
                advertised = "{}:{}".format(*self.mesh.advertised(spec.id))
            out.append(
                NodeInfo(
                    id=spec.id,
                    role=spec.role,
                    host="127.0.0.1",
                    port=(node.port or 0) if node else 0,
                    advertised=advertised,
                    metrics_url=f"http://127.0.0.1:{node.metrics_port}/metrics"
                    if node and node.metrics_port
                    else None,
                    container=node.id if node else None,
                )
            )
        return out

    def container_name(self, node_id: int) -> str:
        return f"txnchaos-{self.run_id}-n{node_id}"

    # ---- start ---------------------------------------------------------------------------
    def _labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.run_id, LABEL_LAUNCHER: "docker", **this_harness().labels()}

    def start(self) -> None:
        from testcontainers.core.network import Network

        self._client = _client()
        try:
            self._client.images.get(self.image)
        except Exception as exc:
            raise LaunchError(
                f"node image {self.image} not found in the Docker engine "
                f"({os.environ.get('DOCKER_HOST', 'default socket')}); "
                "build it with scripts/build-image.sh"
            ) from exc
        self.watchdog = Watchdog(self.run_id, self.run_dir / "logs" / "docker-watchdog.log")
        network = Network(docker_network_kw={"driver": "bridge", "labels": self._labels()})
        network.name = f"txnchaos-{self.run_id}"
        self.network = network.create()
        self.gateway = self._gateway()
        ids = [n.id for n in self.layout.nodes]
        self.mesh = ProxyMesh(
            ids,
            self.run_dir,
            seed=self.spec.seed,
            node_to_node=self.spec.proxied,
            host=self.gateway if self.spec.proxied else "127.0.0.1",
        )
        self.fleet = self.mesh.fleet
        controller = self.layout.controller_node()
        self._start_node(controller)
        others = [n for n in self.layout.nodes if n is not controller]
        for spec in others:
            self._create(spec).container.start()
        for spec in others:
            self._wait_ready(self._nodes[spec.id])

    def _gateway(self) -> str:
        assert self.network is not None
        net = self._client.networks.get(self.network.id)
        for config in net.attrs.get("IPAM", {}).get("Config") or []:
            if config.get("Gateway"):
                return str(config["Gateway"])
        raise LaunchError(f"network {self.network.name} has no gateway address")

    def _command(self, spec: NodeSpec) -> list[str]:
        assert self.mesh is not None
        host, port = self.mesh.advertised(spec.id)
        cmd = [
            f"--id={spec.id}",
            f"--roles={spec.role.replace('+', ',')}",
            f"--data-dir={DATA_IN_CONTAINER}",
            "--host=0.0.0.0",
            f"--port={NODE_PORT}",
            f"--advertised-host={host}",
            f"--advertised-port={port}",
            "--metrics-host=0.0.0.0",
            f"--metrics-port={METRICS_PORT}",
        ]
        coordinators = [n.id for n in self.layout.nodes if "coordinator" in n.roles]
        cmd.append(f"--coordinator-ids={','.join(map(str, coordinators))}")
        controller = self.layout.controller_node()
        for other in self.layout.nodes:
            if other is spec:
                continue
            if self.spec.proxied:
                address = "{}:{}".format(*self.mesh.peer_address(spec.id, other.id))
            else:
                address = f"{self.container_name(other.id)}:{NODE_PORT}"
            if other is controller:
                cmd.append(f"--controller={address}")
            cmd.append(f"--peer={other.id}={address}")
        cmd += [f"--set={pair}" for pair in self.layout.settings]
        if self.spec.cpus is not None:
            cmd.append(f"--cpus={self.spec.cpus}")  # batch scheduling, inside the cpuset
        return cmd

    def _create(self, spec: NodeSpec) -> _Node:
        from testcontainers.core.container import DockerContainer

        assert self.network is not None
        name = self.container_name(spec.id)
        data = node_dir(self.run_dir / "cluster", spec.id)
        data.mkdir(parents=True, exist_ok=True)
        (data / "node.json").unlink(missing_ok=True)
        container = (
            DockerContainer(self.image)
            .with_name(name)
            .with_network(self.network)
            .with_network_aliases(name)
            .with_volume_mapping(str(data), DATA_IN_CONTAINER, "rw")
            .with_command(self._command(spec))
            .with_kwargs(
                labels=self._labels(),
                user=f"{os.getuid()}:{os.getgid()}",
                **({"cpuset_cpus": self.spec.cpus} if self.spec.cpus is not None else {}),
            )
        )
        # Published on the loopback only, host port picked by Docker.
        container.ports[f"{NODE_PORT}/tcp"] = ("127.0.0.1",)  # type: ignore[assignment]
        container.ports[f"{METRICS_PORT}/tcp"] = ("127.0.0.1",)  # type: ignore[assignment]
        node = _Node(spec, name, data, container)
        self._nodes[spec.id] = node
        return node

    def _start_node(self, spec: NodeSpec) -> None:
        node = self._create(spec)
        node.container.start()
        self._wait_ready(node)

    def _wait_ready(self, node: _Node) -> None:
        """Point the node's proxies at its published port as soon as the container has one
        (so a node that serves late, after this gives up, is still reached), then wait
        until the node wrote node.json."""
        path = node.data / "node.json"
        deadline = time.monotonic() + READY_TIMEOUT_S
        pointed = False
        while time.monotonic() < deadline:
            status = node.status()
            if status in ("exited", "dead"):
                raise LaunchError(
                    f"node {node.spec.id} (container {node.name}) exited during start-up:\n"
                    f"{self._logs(node)[-3000:]}"
                )
            if status == "running":
                # A disconnected container has no published port until reconnected.
                pointed = pointed or self._point(node)
                if (pointed or node.disconnected) and path.exists():
                    try:
                        json.loads(path.read_text())
                    except ValueError:
                        pass
                    else:
                        return
            time.sleep(0.1)
        raise LaunchError(
            f"node {node.spec.id} (container {node.name}) did not serve within "
            f"{READY_TIMEOUT_S:.0f}s:\n{self._logs(node)[-3000:]}"
        )

    def _point(self, node: _Node) -> bool:
        port = node.published(NODE_PORT)
        if port is None:
            return False
        node.port = port
        node.metrics_port = node.published(METRICS_PORT)
        assert self.mesh is not None
        self.mesh.point(node.spec.id, "127.0.0.1", port)
        return True

    def _logs(self, node: _Node) -> str:
        try:
            out, err = node.container.get_logs()
        except Exception as exc:  # the container may be gone
            return f"(no logs: {exc})"
        return (out + err).decode(errors="replace")

    # ---- node faults ---------------------------------------------------------------------
    def _node(self, node_id: int) -> _Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise LaunchError(f"node {node_id} has no container") from None

    def _kill(self, node_id: int) -> None:
        node = self._node(node_id)
        if node.status() in ("running", "paused"):
            node.wrapped().kill()
        node.port = node.metrics_port = None

    def _node_dir(self, node_id: int) -> Path:
        return self._node(node_id).data  # the bind mount of the container's data

    def _pause(self, node_id: int) -> None:
        node = self._node(node_id)
        if node.status() != "running":
            raise LaunchError(f"node {node_id} is not running; nothing to pause")
        node.wrapped().pause()

    def _resume(self, node_id: int) -> None:
        node = self._node(node_id)
        if node.status() != "paused":
            raise LaunchError(f"node {node_id} is not paused")
        node.wrapped().unpause()

    def _restart(self, node_id: int) -> None:
        node = self._node(node_id)
        container = node.wrapped()
        status = node.status()
        if status == "paused":
            container.unpause()
        if status in ("running", "paused"):
            container.stop(timeout=STOP_GRACE_S)
        (node.data / "node.json").unlink(missing_ok=True)
        node.port = node.metrics_port = None
        container.start()
        self._wait_ready(node)

    def _disconnect(self, node_id: int) -> None:
        node = self._node(node_id)
        assert self.network is not None
        self._client.networks.get(self.network.id).disconnect(node.id)
        node.disconnected = True
        node.port = node.metrics_port = None

    def _reconnect(self, node_id: int) -> None:
        node = self._node(node_id)
        assert self.network is not None
        self._client.networks.get(self.network.id).connect(node.id, aliases=[node.name])
        node.disconnected = False
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._point(node):  # published ports come back with the endpoint
            if time.monotonic() > deadline:
                raise LaunchError(f"node {node_id}: no published port after reconnecting")
            time.sleep(0.1)

    # ---- teardown ------------------------------------------------------------------------
    def _stop(self) -> None:
        atexit.unregister(self._atexit)
        for node in self._nodes.values():
            if node.id is None:
                continue
            with contextlib.suppress(Exception):
                logs = self._logs(node)
                (node.data / "node.log").write_text(logs)
            with contextlib.suppress(Exception):
                container = node.wrapped()
                container.reload()
                if container.status == "paused":
                    container.unpause()
                if container.status in ("running", "paused"):
                    container.stop(timeout=STOP_GRACE_S)
        for node in self._nodes.values():
            with contextlib.suppress(Exception):
                node.container.stop()  # removes the container (force, with anonymous volumes)
        if self.network is not None:
            with contextlib.suppress(Exception):
                self.network.remove()
        with contextlib.suppress(Exception):
            remove_run(self.run_id, self._client)
        if self.watchdog is not None:
            self.watchdog.release()

    def _atexit(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    def _describe_extra(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "image": self.image,
            "network": self.network.name if self.network else None,
            "gateway": self.gateway,
            "data_dir": str(self.run_dir / "cluster"),
            "containers": {n.spec.id: n.name for n in self._nodes.values()},
        }


class DockerLauncher:
    name = "docker"

    def __init__(self, image: str | None = None, docker_host: str | None = None) -> None:
        self.image = image or os.environ.get("TXNCHAOS_NODE_IMAGE") or DEFAULT_IMAGE
        self.docker_host = docker_host

    def start(self, spec: ClusterSpec, run_dir: Path) -> DockerHandle:
        if spec.cpus is not None and self.docker_host is None:
            require_usable_cpus(spec.cpus)  # a local engine: its CPUs are this machine's
        configure_testcontainers(self.docker_host)
        run_dir = run_dir.resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        handle = DockerHandle(run_dir, spec, uuid.uuid4().hex[:10], self.image)
        atexit.register(handle._atexit)
        _exit_on_sigterm()
        try:
            handle.start()
        except BaseException:
            handle.stop()
            raise
        return handle
