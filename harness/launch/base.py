"""The launcher interface: what every way of running a cluster under test offers.

A :class:`Launcher` starts a cluster described by a :class:`ClusterSpec` and returns a
:class:`ClusterHandle`. Three implementations (see :mod:`.registry`):

* ``local``: the project's nodes as processes on this machine (:mod:`.local_launcher`);
* ``docker``: the project's nodes as containers of the node image (:mod:`.docker`);
* ``external``: any Kafka-compatible cluster reached at ``--bootstrap`` (:mod:`.external`).

Handles are synchronous (blocking calls): asyncio callers run them with
``asyncio.to_thread``; the fault proxies run on their own loop thread
(:class:`~txnchaos.harness.faults.proxy.thread.FleetThread`), exposed as ``fleet``.

Node faults (``kill``, ``pause``/``resume``, ``restart``, ``disconnect``/``reconnect``) are
offered per launcher; ``capabilities`` says which. A fault the launcher cannot apply
raises :class:`UnsupportedFault`. Every node fault applied through a handle is written to
the run's fault log (``faults.jsonl``, the proxy's log when proxied) with ``link`` null,
``target`` ``{"node": id, "role": role}`` and ``params`` ``{"launcher": name}``: ``kill`` and
``restart`` span the operation itself (for a restart: until the node serves again),
``pause`` and ``disconnect`` span until ``resume``/``reconnect`` (or until a restart, a kill
of a paused node, or the cluster's stop ends them). A ``kill`` and a ``restart`` also give
the node a new incarnation in the proxy fleet (``ProxyFleet.new_incarnation``), which tells
the connections of its new process from the old one's (the ``stale_marker`` rule reads it).
"""

from __future__ import annotations

import abc
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...rundir.fault_log import FaultLog
from .errors import LaunchError, UnsupportedFault

if TYPE_CHECKING:
    from ..faults.proxy.thread import FleetThread

KILL = "kill"
PAUSE = "pause"
RESUME = "resume"
RESTART = "restart"
DISCONNECT = "disconnect"
RECONNECT = "reconnect"
TEAR = "tear"
NODE_FAULTS = frozenset({KILL, PAUSE, RESUME, RESTART, DISCONNECT, RECONNECT})

__all__ = [
    "ClusterHandle",
    "ClusterSpec",
    "LaunchError",
    "Launcher",
    "NodeInfo",
    "UnsupportedFault",
    "link_name",
]


@dataclass
class ClusterSpec:
    """What to run. ``settings`` are ``KEY=VALUE`` node settings (``--set``); ``cpus`` a CPU
    list every node is placed on (local processes, or containers' cpusets; not external).

    ``proxied``: put a fault proxy on every link (client-to-node and node-to-node) so that
    proxy faults can hit any of them. ``seed`` seeds the proxy rules' random draws.
    The external launcher ignores ``brokers``/``coordinators``/``settings`` (the cluster
    exists already) and is always proxied on the client side.
    """

    brokers: int = 1
    coordinators: int = 0
    settings: list[str] = field(default_factory=list)
    proxied: bool = True
    seed: int | str | None = None
    cpus: str | None = None  # CPU list for the nodes (as ``cluster up --cpus`` places them)

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise LaunchError("a cluster needs at least 1 broker")
        if self.coordinators < 0:
            raise LaunchError("coordinators must be 0 or more")

    def refuse_cpus(self, launcher: str) -> None:
        """For launchers that do not place node processes on CPUs."""
        if self.cpus is not None:
            raise LaunchError(
                f"cluster.cpus ({self.cpus}) places the nodes the harness starts; "
                f"the {launcher} launcher starts none"
            )


@dataclass
class NodeInfo:
    """One node as the harness sees it.

    ``host``/``port``: the node's own listener as reachable from this machine (for the
    docker launcher: the published port, which changes when the container restarts).
    ``advertised``: the ``HOST:PORT`` clients are told (a proxy's when proxied).
    ``pid`` (local) or ``container`` (docker) identify what node faults act on; both are
    None for an external cluster or a node that is down.
    """

    id: int
    role: str  # "broker", "coordinator" or "broker+coordinator"
    host: str
    port: int
    advertised: str | None = None
    metrics_url: str | None = None
    pid: int | None = None
    container: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def link_name(source: int | str, target: int) -> str:
    """The proxy link on which ``source`` (a node id, or "client") reaches node ``target``."""
    src = source if isinstance(source, str) else f"n{source}"
    return f"{src}->n{target}"


def package_version() -> str | None:
    """The installed txnchaos package's version (None when it is not installed)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("txnchaos")
    except (ImportError, PackageNotFoundError):
        return None


class ClusterHandle(abc.ABC):
    """A running cluster: addresses, proxies, node faults, teardown.

    ``flavour`` says what runs: ``txnchaos`` (the project's nodes), ``apache-kafka`` or
    ``external``; ``version`` the release (the package's, Kafka's; None if unknown)."""

    launcher: str = "?"
    flavour: str = "txnchaos"
    capabilities: frozenset[str] = frozenset()

    def __init__(self, run_dir: Path, spec: ClusterSpec) -> None:
        self.run_dir = run_dir
        self.spec = spec
        self.fleet: FleetThread | None = None
        self._own_log: FaultLog | None = None
        self._spans: dict[tuple[str, int], float] = {}  # (kind, node) -> start
        self._lock = threading.Lock()
        self._stopped = False
        self._transaction_version: int | None = None

    @property
    def version(self) -> str | None:
        return package_version() if self.flavour == "txnchaos" else None

    def transaction_version(self) -> int | None:
        """The cluster's finalized transaction.version, asked once of a bootstrap server
        (ApiVersions); None when it cannot tell (no answer, or no such feature)."""
        if self._transaction_version is None and not self._stopped:
            from .probe import finalized_features

            for server in self.bootstrap.split(","):
                host, _, port = server.strip().rpartition(":")
                if not port.isdigit():
                    continue
                features = finalized_features((host.strip("[]"), int(port)))
                if features is not None:
                    self._transaction_version = features.get("transaction.version", 0)
                    break
        return self._transaction_version

    # ---- addresses ---------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def bootstrap(self) -> str:
        """``HOST:PORT[,...]`` for clients (through the proxies when proxied)."""

    @property
    @abc.abstractmethod
    def nodes(self) -> list[NodeInfo]:
        """The nodes as of now (pids, containers and ports change with faults)."""

    @property
    def links(self) -> list[str]:
        """Names of the proxied links (``client->n1``, ``n1->n1001``, ...)."""
        if self.fleet is None or self._stopped:
            return []
        return sorted(self.fleet.call(lambda: list(self.fleet.fleet.links)))  # type: ignore[union-attr]

    def node(self, node_id: int) -> NodeInfo:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise LaunchError(f"no node {node_id} (nodes: {[n.id for n in self.nodes]})")

    def metrics_urls(self) -> dict[int, str]:
        """Node id -> Prometheus text endpoint, for the nodes whose endpoint is known."""
        return {n.id: n.metrics_url for n in self.nodes if n.metrics_url}

    # ---- node faults -------------------------------------------------------------------
    def require(self, fault: str, node_id: int) -> None:
        """Raise :class:`UnsupportedFault` unless this launcher can do ``fault`` to the node
        (a fault that combines steps checks the last one before it takes the first)."""
        if fault not in self.capabilities:
            raise UnsupportedFault(
                f"the {self.launcher} launcher cannot {fault} nodes "
                f"(it supports: {', '.join(sorted(self.capabilities)) or 'no node faults'})"
            )
        self.node(node_id)

    def kill(self, node_id: int) -> None:
        """Kill the node abruptly (SIGKILL / docker kill); it stays down until restart."""
        self.require(KILL, node_id)
        self._end_span(PAUSE, node_id)
        start = time.time()
        self._kill(node_id)
        self._new_incarnation(node_id)
        self._record(KILL, node_id, start, time.time())

    def pause(self, node_id: int) -> None:
        """Freeze the node (SIGSTOP / docker pause): connections stay open, nothing answers."""
        self.require(PAUSE, node_id)
        self._pause(node_id)
        with self._lock:
            self._spans.setdefault((PAUSE, node_id), time.time())

    def resume(self, node_id: int) -> None:
        """Undo :meth:`pause`."""
        self.require(RESUME, node_id)
        self._resume(node_id)
        self._end_span(PAUSE, node_id)

    def restart(self, node_id: int) -> None:
        """Stop the node cleanly if it runs (paused: resumed first), start it again with the
        same data and addresses; returns once it serves."""
        self.require(RESTART, node_id)
        start = time.time()
        self._new_incarnation(node_id)
        self._restart(node_id)
        self._end_span(PAUSE, node_id)
        self._record(RESTART, node_id, start, time.time())

    def _new_incarnation(self, node_id: int) -> None:
        """Tell the proxies that the node's next process is a new incarnation: after a kill
        (the old process is gone), and as a restart begins (the old process only shuts down
        from then on). The connections they accept from it from now on carry the new
        incarnation's number (a pause or a disconnect keeps the process: not one)."""
        if self.fleet is not None and not self._stopped:
            fleet = self.fleet.fleet
            self.fleet.call(fleet.new_incarnation, node_id)

    def tear(self, node_id: int) -> list[str]:
        """Leave a torn tail in a node's files, as a power loss can
        (:mod:`~txnchaos.harness.faults.torn_tail`); the node must be down (killed).
        Returns what was torn, one line each."""
        self.require(TEAR, node_id)
        from ..faults.torn_tail import tear_node

        return tear_node(self._node_dir(node_id))

    def _node_dir(self, node_id: int) -> Path:
        raise UnsupportedFault(TEAR)

    def disconnect(self, node_id: int) -> None:
        """Cut the node off the network (docker network disconnect)."""
        self.require(DISCONNECT, node_id)
        self._disconnect(node_id)
        with self._lock:
            self._spans.setdefault((DISCONNECT, node_id), time.time())

    def reconnect(self, node_id: int) -> None:
        """Undo :meth:`disconnect`."""
        self.require(RECONNECT, node_id)
        self._reconnect(node_id)
        self._end_span(DISCONNECT, node_id)

    def _kill(self, node_id: int) -> None:
        raise UnsupportedFault(KILL)

    def _pause(self, node_id: int) -> None:
        raise UnsupportedFault(PAUSE)

    def _resume(self, node_id: int) -> None:
        raise UnsupportedFault(RESUME)

    def _restart(self, node_id: int) -> None:
        raise UnsupportedFault(RESTART)

    def _disconnect(self, node_id: int) -> None:
        raise UnsupportedFault(DISCONNECT)

    def _reconnect(self, node_id: int) -> None:
        raise UnsupportedFault(RECONNECT)

    # ---- fault log ---------------------------------------------------------------------
    def fault_log(self) -> FaultLog:
        """The run's fault log: the proxy fleet's when there is one."""
        if self.fleet is not None and self.fleet.fleet.fault_log is not None:
            return self.fleet.fleet.fault_log
        if self._own_log is None:
            self._own_log = FaultLog(self.run_dir)
        return self._own_log

    def _record(self, kind: str, node_id: int, start: float, end: float) -> None:
        role = next((n.role for n in self.nodes if n.id == node_id), None)
        self.fault_log().write(
            kind,
            start,
            end,
            link=None,
            target={"node": node_id, "role": role},
            params={"launcher": self.launcher},
        )

    def _end_span(self, kind: str, node_id: int) -> None:
        with self._lock:
            start = self._spans.pop((kind, node_id), None)
        if start is not None:
            self._record(kind, node_id, start, time.time())

    def _end_all_spans(self) -> None:
        with self._lock:
            keys = list(self._spans)
        for kind, node_id in keys:
            self._end_span(kind, node_id)

    # ---- teardown ----------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every node and proxy and release what the launcher created. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._end_all_spans()
            self._stop()
        finally:
            if self.fleet is not None:
                self.fleet.close()
            if self._own_log is not None:
                self._own_log.close()

    @abc.abstractmethod
    def _stop(self) -> None: ...

    def __enter__(self) -> ClusterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- run.json ----------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """A JSON-able description for the run directory's ``run.json``."""
        links: dict[str, Any] = {}
        if self.fleet is not None and not self._stopped:
            links = {
                name: {"listen": doc["listen"], "upstream": doc["upstream"]}
                for name, doc in self.fleet.describe()["links"].items()
            }
        return {
            "launcher": self.launcher,
            "flavour": self.flavour,
            "version": self.version,
            "transaction_version": self.transaction_version(),
            "bootstrap": self.bootstrap,
            "proxied": self.fleet is not None,
            "spec": asdict(self.spec),
            "capabilities": sorted(self.capabilities),
            "nodes": [n.to_dict() for n in self.nodes],
            "links": links,
            **self._describe_extra(),
        }

    def _describe_extra(self) -> dict[str, Any]:
        return {}

    def topic_configs(self) -> dict[str, str]:
        """Topic settings every topic the harness creates on this cluster gets (a topic's
        own ``configs`` win): what a scenario's cluster settings need on this cluster that
        its server properties cannot carry (an Apache Kafka release's segment size)."""
        return {}


class Launcher(Protocol):
    """Starts clusters. Launcher-specific options go to the constructor
    (e.g. ``ExternalLauncher(bootstrap=...)``, ``DockerLauncher(image=...)``)."""

    name: str

    def start(self, spec: ClusterSpec, run_dir: Path) -> ClusterHandle:
        """Start the cluster (proxies first when proxied); returns once every node serves.
        Files go under ``run_dir`` (node data, logs, ``faults.jsonl``)."""
        ...
