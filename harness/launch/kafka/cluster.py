"""An Apache Kafka cluster as JVMs on this machine: format, start, stop, kill, pause,
restart, by the PIDs this module started.

Layout of a cluster data directory::

    DIR/kafka-cluster.json         the plan (release, ids, roles, ports, settings, cluster id)
    DIR/node-<id>/server.properties
    DIR/node-<id>/data/            the node's log directory (formatted once)
    DIR/node-<id>/node.log         the JVM's output (SLF4J simple logger)
    DIR/node-<id>/jmx-exporter.yaml  the metrics rules (brokers)
    DIR/zookeeper/                 a ZooKeeper's data and log (releases before KRaft)

The state file (``--state FILE``, ``RUN_DIR/cluster-state.json`` under the harness) has the
shape of the project's clusters' (``bootstrap``, ``data_dir``, ``nodes``: id, role, pid,
host, port, metrics_port) plus ``"flavour": "apache-kafka"`` and ``"version"``, so that
``txnchaos cluster down/kill/restart/status --state`` know which kind of cluster it is.

Start-up: storage is formatted with the release's own tool on first start
(``kafka.tools.StorageTool format``, ``--feature transaction.version=N`` when the scenario
sets it), the controllers are started, then the brokers; :meth:`up` returns once every
broker lists itself in its own Metadata answer (it has joined, unfenced) and every
controller answers ApiVersions.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import probe
from ..errors import LaunchError
from .jvm import is_our_jvm, start_jvm
from .layout import (
    LAYOUT_FILE,
    Addressing,
    KafkaLayout,
    KafkaNode,
    SegmentSize,
    free_port,
    hosts_file,
    server_properties,
    split_settings,
)
from .metrics import EXPORTER_CONFIG
from .release import (
    KafkaRelease,
    java_binary,
    java_major,
    java_problem,
    jmx_exporter_jar,
    server_lib,
)

FLAVOUR = "apache-kafka"
#: how long a node may take to serve (and the internal topics to be ready): 6-8 s on a quiet
#: 2-core machine, 50-180 s at load 20-30, and controllers did not serve within 120 s at
#: load 85-120 (three launches in one session); it returns as soon as they serve
READY_TIMEOUT_S = 300.0
START_ATTEMPTS = 3
STOP_TIMEOUT_S = 20.0
#: JVM options for a node: small heaps (2 cores, several JVMs per cluster), the serial
#: collector (the least threads and the fastest start for heaps this size)
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError")
#: every JVM's logging: SLF4J's simple logger to standard output (the node's log file)
LOG_OPTIONS = (
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
    "-Dorg.slf4j.simpleLogger.logFile=System.out",
)


PID_FILE = "node.pid"


def node_dir(data_dir: Path, node_id: int) -> Path:
    return data_dir / f"node-{node_id}"


@dataclass
class KafkaCluster:
    """A planned cluster in ``data_dir`` and the JVMs this object started or was told of."""

    data_dir: Path
    layout: KafkaLayout
    release: KafkaRelease
    #: proxies (advertised addresses, controller addresses) per node; empty: direct
    addressing: dict[int, Addressing] = field(default_factory=dict)
    #: JVMs die with this process (the harness); False for `cluster up --detach`
    tie_to_harness: bool = True
    metrics: bool = True
    progress: Callable[[str], None] | None = None
    #: called with a node once it serves (its ports known)
    on_ready: Callable[[KafkaNode], None] | None = None
    #: called when nodes got new ports (a port was taken before a JVM could bind it)
    on_ports_changed: Callable[[], None] | None = None
    pids: dict[int, int | None] = field(default_factory=dict)
    _procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    _lib: Path | None = None
    _agent: Path | None = None
    _segments: SegmentSize | None = None
    _zookeeper: subprocess.Popen[bytes] | None = None

    # ---- construction --------------------------------------------------------------
    @classmethod
    def prepare(
        cls,
        data_dir: Path,
        version: str,
        brokers: int,
        controllers: int,
        settings: list[str],
        *,
        ports: bool = True,
        **options: Any,
    ) -> KafkaCluster:
        """The cluster in ``data_dir``, planned anew or as saved there (same sizes and
        release required); checks Java and the settings. ``ports``: pick the nodes' ports
        now (False: the caller calls :meth:`pick_ports` once its own listeners are bound)."""
        release = KafkaRelease.parse(version)
        split_settings(settings)  # refuse what Kafka cannot take before anything starts
        data_dir = data_dir.resolve()
        existing = KafkaLayout.load(data_dir)
        if existing is None:
            layout = KafkaLayout.plan(release.version, brokers, controllers, settings)
        else:
            if (existing.version, existing.brokers, existing.controllers) != (
                release.version,
                brokers,
                controllers,
            ):
                raise LaunchError(
                    f"{data_dir} holds Apache Kafka {existing.version} with "
                    f"{existing.brokers} broker(s) and {existing.controllers} controller(s); "
                    "start it with those or use another --data-dir"
                )
            layout = existing
            if settings:
                layout.settings = list(settings)
        _, tv = split_settings(layout.settings)
        if tv is not None and not release.has_transaction_version:
            raise LaunchError(
                f"transaction.version: Apache Kafka {release} has no transaction.version "
                "feature (it came with 4.0, KIP-890)"
            )
        if not release.kraft and layout.controllers:
            raise LaunchError(
                f"Apache Kafka {release} runs with ZooKeeper: it has no KRaft controllers "
                "(coordinators: 0)"
            )
        cluster = cls(data_dir, layout, release, **options)
        cluster.check_java()
        if ports:
            cluster.pick_ports()
        cluster.pids = {n.id: None for n in layout.nodes}
        return cluster

    def pick_ports(self, nodes: list[KafkaNode] | None = None) -> None:
        """Free ports for the nodes that have none (``nodes``: new ones for those), saved."""
        for node in self.layout.nodes:
            self.layout.pick_ports(node, fresh=nodes is not None and node in nodes)
        if not self.release.kraft and not self.layout.zookeeper_port:
            taken = {p for n in self.layout.nodes for p in n.all_ports()}
            self.layout.zookeeper_port = free_port(taken)
        self.layout.save(self.data_dir)

    def check_java(self) -> None:
        java = java_binary()
        problem = java_problem(self.release, java_major(java))
        if problem:
            raise LaunchError(f"{problem}; set TXNCHAOS_KAFKA_JAVA_HOME to a JDK that runs it")

    @property
    def lib(self) -> Path:
        if self._lib is None:
            self._lib = server_lib(self.release, self.progress)
        return self._lib

    @property
    def segments(self) -> SegmentSize:
        """How the scenario's log.segment.bytes reaches this release (see SegmentSize); planned
        once (it reads the release's jar), as the settings are fixed once the cluster is."""
        if self._segments is None:
            self._segments = SegmentSize.plan(self.layout.settings, self.release.version, self.lib)
        return self._segments

    @property
    def agent(self) -> Path:
        if self._agent is None:
            self._agent = jmx_exporter_jar(self.progress)
        return self._agent

    # ---- files ---------------------------------------------------------------------
    def properties_path(self, node: KafkaNode) -> Path:
        return node_dir(self.data_dir, node.id) / "server.properties"

    def log_path(self, node: KafkaNode) -> Path:
        return node_dir(self.data_dir, node.id) / "node.log"

    def hosts_path(self, node: KafkaNode) -> Path:
        return node_dir(self.data_dir, node.id) / "hosts"

    def _write_properties(self, node: KafkaNode) -> Path:
        directory = node_dir(self.data_dir, node.id)
        directory.mkdir(parents=True, exist_ok=True)
        self.hosts_path(node).write_text(
            hosts_file(self.layout, node, self.addressing.get(node.id))
        )
        path = self.properties_path(node)
        text = server_properties(
            self.layout,
            node,
            directory / "data",
            self.addressing.get(node.id),
            kraft=self.release.kraft,
            advertise_controller=self.release.controller_advertises,
            segments=self.segments,
        )
        path.write_text(text)
        return path

    def _java(self, main: str, *args: str, options: tuple[str, ...] = ()) -> list[str]:
        return [java_binary(), *options, "-cp", f"{self.lib}/*", main, *args]

    # ---- storage -------------------------------------------------------------------
    def _format(self, node: KafkaNode) -> None:
        """Format the node's log directory once (KRaft)."""
        data = node_dir(self.data_dir, node.id) / "data"
        if (data / "meta.properties").exists():
            return
        props = self._write_properties(node)
        format_storage(self.lib, self.layout, props, hosts=self.hosts_path(node))
        self.layout.save(self.data_dir)

    # ---- processes -----------------------------------------------------------------
    def _spawn(self, node: KafkaNode) -> subprocess.Popen[bytes]:
        props = self._write_properties(node)
        options = [*JVM_OPTIONS, *LOG_OPTIONS]
        if self.release.kraft:  # the controllers' names (ZooKeeper's 3.4 client cannot take it)
            options.append(f"-Djdk.net.hosts.file={self.hosts_path(node)}")
        if self.metrics and node.is_broker:
            rules = node_dir(self.data_dir, node.id) / "jmx-exporter.yaml"
            rules.write_text(EXPORTER_CONFIG)
            options.append(f"-javaagent:{self.agent}=127.0.0.1:{node.metrics_port}:{rules}")
        cmd = self._java("kafka.Kafka", str(props), options=tuple(options))
        proc = start_jvm(cmd, self.log_path(node), tie_to_harness=self.tie_to_harness)
        self._procs[node.id] = proc
        self.pids[node.id] = proc.pid
        (node_dir(self.data_dir, node.id) / PID_FILE).write_text(f"{proc.pid}\n")
        return proc

    def _ready(self, node: KafkaNode) -> bool:
        if node.is_broker:
            seen = probe.brokers_seen(("127.0.0.1", node.client_port), timeout=2.0)
            return seen is not None and node.id in seen
        return probe.answers(("127.0.0.1", node.controller_port), timeout=2.0)

    def _wait_ready(self, nodes: list[KafkaNode], timeout: float = READY_TIMEOUT_S) -> None:
        pending = list(nodes)
        deadline = time.monotonic() + timeout
        while pending:
            for node in list(pending):
                proc = self._procs.get(node.id)
                if proc is not None and proc.poll() is not None:
                    raise LaunchError(
                        f"Apache Kafka node {node.id} exited with code {proc.returncode} "
                        f"during start-up; see {self.log_path(node)}:\n{_tail(self.log_path(node))}"
                    )
                if self._ready(node):
                    pending.remove(node)
                    if self.on_ready is not None:
                        self.on_ready(node)
            if not pending:
                return
            if time.monotonic() > deadline:
                ids = [n.id for n in pending]
                raise LaunchError(
                    f"Apache Kafka node(s) {ids} did not serve within {timeout:.0f} s; see "
                    f"{self.log_path(pending[0])}:\n{_tail(self.log_path(pending[0]))}"
                )
            time.sleep(0.2)

    def up(self) -> None:
        """Format what is new, start every node (controllers first); return once all serve.

        A port picked free may be taken by another process before the JVM binds it: a node
        that fails to bind gets new ports (``on_ports_changed`` is told, so proxies follow)
        and the whole cluster starts again (its configs name each other's ports), up to
        :data:`START_ATTEMPTS` times."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._up_once()
                return
            except LaunchError:
                taken = [n for n in self.layout.nodes if _bind_failed(self.log_path(n))]
                self.down()
                if not taken or attempt == START_ATTEMPTS:
                    raise
                for node in taken:  # the failed attempt's log says why it moved
                    self.log_path(node).rename(self.log_path(node).with_suffix(f".{attempt}.log"))
                self.pick_ports(taken)
                if self.on_ports_changed is not None:
                    self.on_ports_changed()
            except BaseException:
                self.down()
                raise

    def _up_once(self) -> None:
        if not self.release.kraft:
            self._start_zookeeper()
        else:
            for node in self.layout.nodes:
                self._format(node)
        controllers = [n for n in self.layout.nodes if n.is_controller and not n.is_broker]
        for node in self.layout.nodes:  # start together: the quorum forms as they come
            self._spawn(node)
        self._wait_ready(controllers)
        self._wait_ready(self.layout.broker_nodes)
        self._warm_up()
        self.layout.save(self.data_dir)

    def _warm_up(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Have Kafka create its internal topics and elect their leaders now: it makes
        __transaction_state and __consumer_offsets (50 partitions each) on the first
        FindCoordinator of each kind, which took 10-20 s on a loaded 2-core machine and
        would otherwise be spent inside the run's first transactions and faults (the
        project's nodes have their coordinator state from the start)."""
        broker = self.layout.broker_nodes[0]
        deadline = time.monotonic() + timeout
        for key_type in (1, 0):  # transactions, then groups
            while True:
                code = probe.find_coordinator(
                    ("127.0.0.1", broker.client_port), "txnchaos-warm-up", key_type
                )
                if code == 0:
                    break
                if time.monotonic() > deadline:
                    what = "__transaction_state" if key_type == 1 else "__consumer_offsets"
                    raise LaunchError(
                        f"Apache Kafka did not make {what} ready within {timeout:.0f} s "
                        f"(FindCoordinator error {code}); see {self.log_path(broker)}"
                    )
                time.sleep(0.2)

    # ---- node faults ---------------------------------------------------------------
    def alive(self, node_id: int) -> bool:
        """Whether the node's JVM (the one this cluster knows of) runs."""
        return self._alive(node_id) is not None

    def _alive(self, node_id: int) -> int | None:
        pid = self.pids.get(node_id)
        node = self.layout.node(node_id)
        if pid is None or not is_our_jvm(pid, str(self.properties_path(node))):
            return None
        return pid

    def _signal(self, node_id: int, sig: int) -> bool:
        pid = self._alive(node_id)
        if pid is None:
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, node_id: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self._procs.get(node_id)
            if proc is not None:
                if proc.poll() is not None:
                    return True
            elif self._alive(node_id) is None:
                return True
            time.sleep(0.05)
        return False

    def stop_node(self, node_id: int, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a paused JVM is continued to see it), SIGKILL after ``timeout``."""
        if self._signal(node_id, signal.SIGTERM):
            self._signal(node_id, signal.SIGCONT)
            if not self._wait_gone(node_id, timeout):
                self._signal(node_id, signal.SIGKILL)
                self._wait_gone(node_id, 10.0)
        self._reap(node_id)

    def _reap(self, node_id: int) -> None:
        proc = self._procs.pop(node_id, None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.pids[node_id] = None

    def kill_node(self, node_id: int) -> None:
        self.layout.node(node_id)
        self._signal(node_id, signal.SIGKILL)
        self._wait_gone(node_id, 10.0)
        self._reap(node_id)

    def pause_node(self, node_id: int) -> bool:
        self.layout.node(node_id)
        return self._signal(node_id, signal.SIGSTOP)

    def resume_node(self, node_id: int) -> bool:
        self.layout.node(node_id)
        return self._signal(node_id, signal.SIGCONT)

    def restart_node(self, node_id: int) -> None:
        """Stop the node cleanly if it runs, start it with the same data and ports; return
        once it serves (a port taken meanwhile: new ports, and ``on_ready`` says so)."""
        node = self.layout.node(node_id)
        self.stop_node(node_id)
        self._spawn(node)
        try:
            self._wait_ready([node])
        except LaunchError:
            if self._procs[node.id].poll() is None or not _bind_failed(self.log_path(node)):
                raise
            if node.is_controller:  # every other node names its port: they cannot follow
                raise LaunchError(
                    f"controller {node.id}'s port {node.controller_port} was taken while it "
                    f"was down; the other nodes know it by that port (see {self.log_path(node)})"
                ) from None
            self._reap(node.id)
            self.log_path(node).rename(self.log_path(node).with_suffix(".bind-failed.log"))
            self.pick_ports([node])
            if self.on_ports_changed is not None:
                self.on_ports_changed()
            self._spawn(node)
            self._wait_ready([node])

    def down(self) -> None:
        """Stop every node: brokers first (a clean shutdown needs a controller), then the
        controllers, then ZooKeeper."""
        brokers = [n for n in self.layout.nodes if n.is_broker]
        others = [n for n in self.layout.nodes if not n.is_broker]
        for group in (brokers, others):
            for node in group:
                if self._signal(node.id, signal.SIGTERM):
                    self._signal(node.id, signal.SIGCONT)
            for node in group:
                self.stop_node(node.id)
        self._stop_zookeeper()

    # ---- ZooKeeper (releases before KRaft) -----------------------------------------
    def _start_zookeeper(self) -> None:
        directory = self.data_dir / "zookeeper"
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "zookeeper.properties"
        config.write_text(
            f"dataDir={directory / 'data'}\nclientPort={self.layout.zookeeper_port}\n"
            "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok\n"
        )
        cmd = self._java(
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(config),
            # ZooKeeper 3.4 (Kafka < 2.4) registers log4j 1's MBeans unless told not to
            options=(
                "-Xmx128m",
                "-XX:+UseSerialGC",
                "-Dzookeeper.jmx.log4j.disable=true",
                *LOG_OPTIONS,
            ),
        )
        self._zookeeper = start_jvm(
            cmd, directory / "zookeeper.log", tie_to_harness=self.tie_to_harness
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._zookeeper.poll() is not None:
                raise LaunchError(
                    f"ZooKeeper exited with code {self._zookeeper.returncode}; see "
                    f"{directory / 'zookeeper.log'}"
                )
            if _zookeeper_ok(self.layout.zookeeper_port):
                return
            time.sleep(0.2)
        raise LaunchError(f"ZooKeeper did not serve within 60 s; see {directory / 'zookeeper.log'}")

    def _stop_zookeeper(self) -> None:
        zk = self._zookeeper
        self._zookeeper = None
        if zk is None or zk.poll() is not None:
            return
        zk.terminate()
        try:
            zk.wait(timeout=10)
        except subprocess.TimeoutExpired:
            zk.kill()
            zk.wait(timeout=5)

    # ---- the state file ------------------------------------------------------------
    def advertised(self, node: KafkaNode) -> tuple[str, int]:
        addr = self.addressing.get(node.id)
        if addr is not None and addr.client is not None:
            return addr.client
        return "127.0.0.1", node.port

    def bootstrap(self) -> str:
        return ",".join("{}:{}".format(*self.advertised(n)) for n in self.layout.broker_nodes)

    def state(self) -> dict[str, Any]:
        nodes = []
        for n in self.layout.nodes:
            nodes.append(
                {
                    "id": n.id,
                    "role": n.role,
                    "pid": self.pids.get(n.id),
                    "host": "127.0.0.1",
                    "port": n.port,
                    "metrics_port": n.metrics_port if self.metrics and n.is_broker else 0,
                    "properties": str(self.properties_path(n)),
                }
            )
        return {
            "flavour": FLAVOUR,
            "version": self.release.version,
            "bootstrap": self.bootstrap(),
            "data_dir": str(self.data_dir),
            "nodes": nodes,
        }

    def write_state(self, state_file: Path) -> None:
        state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = state_file.with_name(state_file.name + ".tmp")
        tmp.write_text(json.dumps(self.state(), indent=2) + "\n")
        os.replace(tmp, state_file)

    @classmethod
    def from_data_dir(cls, data_dir: Path) -> KafkaCluster:
        """The cluster in ``data_dir`` and the JVMs of it still running (from their pid
        files), not tied to this process (``txnchaos cluster down/kill/restart``)."""
        layout = KafkaLayout.load(data_dir)
        if layout is None:
            raise LaunchError(f"{data_dir} holds no Apache Kafka cluster ({LAYOUT_FILE})")
        cluster = cls(data_dir, layout, KafkaRelease.parse(layout.version), tie_to_harness=False)
        cluster.pids = {}
        for node in layout.nodes:
            try:
                pid: int | None = int((node_dir(data_dir, node.id) / PID_FILE).read_text())
            except (OSError, ValueError):
                pid = None
            cluster.pids[node.id] = pid
            if pid is not None and not cluster.alive(node.id):
                cluster.pids[node.id] = None
        return cluster


def run_tool(lib: Path, args: list[str], hosts: Path | None = None) -> str:
    """Run one of the release's tools (a main class and its arguments; ``hosts``: the hosts
    file it resolves names with); its output."""
    cmd = [java_binary(), "-Xmx256m", "-XX:+UseSerialGC"]
    if hosts is not None:
        cmd.append(f"-Djdk.net.hosts.file={hosts}")
    cmd += ["-cp", f"{lib}/*", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired as exc:
        raise LaunchError(f"{args[0]} {args[1]} did not finish within 120 s") from exc
    if proc.returncode != 0:
        raise LaunchError(
            f"{args[0]} {args[1]} failed (exit {proc.returncode}): "
            f"{_java_error(proc.stdout + proc.stderr)}"
        )
    return proc.stdout


def format_storage(
    lib: Path, layout: KafkaLayout, properties: Path, *, hosts: Path | None = None
) -> None:
    """Format the log directory ``properties`` names with the release's StorageTool, for the
    layout's cluster id (made first if it has none) and transaction.version setting."""
    if not layout.cluster_id:
        out = run_tool(lib, ["kafka.tools.StorageTool", "random-uuid"])
        layout.cluster_id = out.strip().splitlines()[-1].strip()
    args = ["kafka.tools.StorageTool", "format", "-t", layout.cluster_id]
    args += ["-c", str(properties), "--ignore-formatted"]
    _, tv = split_settings(layout.settings)
    if tv is not None:
        args += ["--feature", f"transaction.version={tv}"]
    run_tool(lib, args, hosts)


def _zookeeper_ok(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


def _bind_failed(log: Path) -> bool:
    """Whether a node's log says it could not bind one of its ports."""
    return "Address already in use" in _tail(log, 400)


def _java_error(output: str) -> str:
    """The exception line of a Java tool's failure (else its last line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if "Exception" in line and not line.startswith("at "):
            return line[:500]
    return lines[-1][:500] if lines else "no output"


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
