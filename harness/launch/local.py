"""The local launcher: the project's nodes as processes on this machine.

Layout of a cluster data directory::

    DIR/cluster.json        the layout (brokers, coordinators, settings, CPUs, ports) so that
                            `cluster up` on an existing DIR restarts the same cluster
    DIR/node-<id>/          one node's data: partitions/, controller/, groups/, ...
    DIR/node-<id>/node.json written by the node when it serves (pid and ports)
    DIR/node-<id>/node.log  the node's output
    DIR/node-<id>/addressing.json  a proxied node's addressing (see below), while the
                            cluster that proxies it runs

The state file (``--state FILE``) is the contract with later tooling:
``{"bootstrap": "127.0.0.1:P1,...", "data_dir": DIR, "nodes": [{"id", "role", "pid",
"host", "port", "metrics_port"}, ...]}``.

Nodes pick free ports themselves on first start (port 0) and keep them across
restarts; if a remembered port has been taken in the meantime the node gets a new
one and the state file says so.

Proxied clusters (the harness's local launcher, :mod:`.local_launcher`) give nodes a
:class:`NodeAddressing` each: the address to advertise (a proxy's), the address of the
controller and of every peer (proxies again). It lives as long as the harness that
owns the proxies and is not saved in ``cluster.json``; the state file then carries each
node's ``advertised_host``/``advertised_port``, ``controller_address`` and ``peers`` (so
``cluster kill/restart --state`` keep them) and a bootstrap through the proxies. The
same addressing is written to each node's ``addressing.json`` when the node is started,
so that ``cluster restart --data-dir`` keeps it too; ``down`` removes those files.
An ``on_ready`` callback sees every node once it serves (its real port known), which is
when the launcher points the proxies at it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...cluster.cpu_placement import CpuListError, check_cpu_list
from .errors import LaunchError
from .lifetime import spawn

COORDINATOR_ID_BASE = 1001
ALL_CPUS = "all"
"""``cpus`` value that drops a saved CPU list (the nodes run wherever the OS puts them)."""
#: How long a live node may take to serve. A node that exits fails at once; a live one took
#: over 60 s only on a loaded machine (imports alone 20-50 s at nice 15 beside a test suite
#: and Kafka JVMs), where 60 s turned about half of the mutation runs into harness errors.
READY_TIMEOUT_S = 180.0


__all__ = ["ClusterLayout", "LaunchError", "LocalCluster", "NodeAddressing", "NodeSpec"]


@dataclass
class NodeSpec:
    id: int
    role: str  # "broker", "coordinator" or "broker+coordinator"
    port: int = 0
    metrics_port: int = 0

    @property
    def roles(self) -> list[str]:
        return self.role.split("+")


@dataclass
class NodeAddressing:
    """How one node is addressed when the harness puts proxies on its links (all
    optional: None / empty keeps the unproxied behaviour)."""

    advertised: tuple[str, int] | None = None  # --advertised-host/--advertised-port
    controller: tuple[str, int] | None = None  # --controller (nodes not hosting it)
    peers: dict[int, tuple[str, int]] = field(default_factory=dict)  # --peer ID=HOST:PORT

    def to_state(self) -> dict[str, Any]:
        """State-file keys, so `cluster restart` keeps a proxied node's addresses."""
        out: dict[str, Any] = {}
        if self.advertised is not None:
            out["advertised_host"], out["advertised_port"] = self.advertised
        if self.controller is not None:
            out["controller_address"] = "{}:{}".format(*self.controller)
        if self.peers:
            out["peers"] = {str(k): "{}:{}".format(*v) for k, v in sorted(self.peers.items())}
        return out

    @classmethod
    def from_state(cls, entry: dict[str, Any]) -> NodeAddressing | None:
        def address(value: str) -> tuple[str, int]:
            host, _, port = value.rpartition(":")
            return host, int(port)

        if not {"advertised_host", "controller_address", "peers"} & entry.keys():
            return None
        advertised = None
        if entry.get("advertised_host") and entry.get("advertised_port"):
            advertised = (str(entry["advertised_host"]), int(entry["advertised_port"]))
        controller = entry.get("controller_address")
        return cls(
            advertised=advertised,
            controller=address(controller) if controller else None,
            peers={int(k): address(v) for k, v in (entry.get("peers") or {}).items()},
        )


@dataclass
class ClusterLayout:
    brokers: int
    coordinators: int
    settings: list[str] = field(default_factory=list)
    nodes: list[NodeSpec] = field(default_factory=list)
    cpus: str | None = None  # a CPU list every node is pinned to (see cluster.cpu_placement)

    @classmethod
    def plan(cls, brokers: int, coordinators: int, settings: list[str]) -> ClusterLayout:
        if brokers < 1:
            raise LaunchError("--brokers must be at least 1")
        if coordinators < 0:
            raise LaunchError("--coordinators must be 0 or more")
        nodes = [NodeSpec(COORDINATOR_ID_BASE + i, "coordinator") for i in range(coordinators)]
        for i in range(1, brokers + 1):
            role = "broker+coordinator" if coordinators == 0 and i == 1 else "broker"
            nodes.append(NodeSpec(i, role))
        return cls(brokers, coordinators, list(settings), nodes)

    def controller_node(self) -> NodeSpec:
        return next(n for n in self.nodes if "coordinator" in n.roles)

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise LaunchError(
            f"no node {node_id} in this cluster (nodes: {[n.id for n in self.nodes]})"
        )

    def save(self, data_dir: Path) -> None:
        doc = {
            "brokers": self.brokers,
            "coordinators": self.coordinators,
            "settings": self.settings,
            "cpus": self.cpus,
            "nodes": [asdict(n) for n in self.nodes],
        }
        _atomic_write(data_dir / "cluster.json", doc)

    @classmethod
    def require(cls, data_dir: Path) -> ClusterLayout:
        """The layout in ``data_dir``; a :class:`LaunchError` when there is none."""
        layout = cls.load(data_dir)
        if layout is None:
            raise LaunchError(f"{data_dir} has no cluster.json; is it a txnchaos cluster?")
        return layout

    @classmethod
    def load(cls, data_dir: Path) -> ClusterLayout | None:
        path = data_dir / "cluster.json"
        if not path.exists():
            return None
        try:
            doc = json.loads(path.read_text())
            return cls(
                brokers=doc["brokers"],
                coordinators=doc["coordinators"],
                settings=list(doc.get("settings", [])),
                nodes=[NodeSpec(**n) for n in doc["nodes"]],
                cpus=doc.get("cpus"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise LaunchError(f"{path} is not a valid cluster layout: {exc}") from exc


def require_usable_cpus(cpus: str) -> None:
    """A :class:`LaunchError` unless every CPU of the list ``cpus`` is usable here."""
    try:
        check_cpu_list(cpus)
    except CpuListError as exc:
        raise LaunchError(str(exc)) from exc


def _atomic_write(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def node_dir(data_dir: Path, node_id: int) -> Path:
    return data_dir / f"node-{node_id}"


ADDRESSING_JSON = "addressing.json"


def is_our_node(pid: int, node_id: int) -> bool:
    """Whether ``pid`` is still the txnchaos node we started (PIDs get reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        return False
    args = [a.decode(errors="replace") for a in cmdline]
    return "node" in args and "--id" in args and args[args.index("--id") + 1] == str(node_id)


class LocalCluster:
    def __init__(
        self,
        data_dir: Path,
        layout: ClusterLayout,
        *,
        addressing: dict[int, NodeAddressing] | None = None,
        on_ready: Callable[[NodeSpec], None] | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.layout = layout
        self.addressing: dict[int, NodeAddressing] = dict(addressing or {})
        self.on_ready = on_ready
        self.pids: dict[int, int | None] = {n.id: None for n in layout.nodes}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        # The nodes get SIGKILL when this process dies (see lifetime.py): set by the
        # harness, which owns them for a run; `cluster up` leaves its nodes running.
        self.die_with_harness = False

    # ---- construction --------------------------------------------------------------
    @classmethod
    def prepare(
        cls,
        data_dir: Path,
        brokers: int,
        coordinators: int,
        settings: list[str],
        *,
        cpus: str | None = None,
        addressing: dict[int, NodeAddressing] | None = None,
        on_ready: Callable[[NodeSpec], None] | None = None,
    ) -> LocalCluster:
        """The cluster in ``data_dir``, planned anew or as it was saved there. Given
        ``settings`` and ``cpus`` (a CPU list for every node, or ``all`` for none) replace
        the saved ones; omitted, the saved ones stay. Nothing is written when the
        resulting CPU list is not usable here."""
        existing = ClusterLayout.load(data_dir)
        if existing is None:
            layout = ClusterLayout.plan(brokers, coordinators, settings)
        else:
            if (existing.brokers, existing.coordinators) != (brokers, coordinators):
                raise LaunchError(
                    f"{data_dir} holds a cluster of {existing.brokers} broker(s) and "
                    f"{existing.coordinators} coordinator(s); start it with those numbers "
                    "or use another --data-dir"
                )
            layout = existing
            if settings:
                layout.settings = list(settings)
        if cpus is not None:
            layout.cpus = None if cpus == ALL_CPUS else cpus
        if layout.cpus is not None:  # given, or saved on a machine with other CPUs
            require_usable_cpus(layout.cpus)
        data_dir.mkdir(parents=True, exist_ok=True)
        cluster = cls(data_dir, layout, addressing=addressing, on_ready=on_ready)
        layout.save(data_dir)
        return cluster

    @classmethod
    def from_state(cls, state_file: Path) -> LocalCluster:
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except OSError as exc:
            problem = exc.strerror or str(exc)
            raise LaunchError(f"cannot read state file {state_file}: {problem}") from exc
        except ValueError as exc:  # not JSON, or not UTF-8 text
            raise LaunchError(f"state file {state_file} is not JSON: {exc}") from exc
        nodes = _check_state(state, state_file)
        data_dir = Path(state["data_dir"])
        layout = ClusterLayout.require(data_dir)
        cluster = cls(data_dir, layout)
        for i, n in enumerate(nodes):
            cluster.pids[n["id"]] = n.get("pid")
            try:
                addressing = NodeAddressing.from_state(n)
            except (ValueError, TypeError, AttributeError) as exc:
                raise LaunchError(
                    f"state file {state_file}: nodes[{i}] has unreadable proxy addresses ({exc})"
                ) from exc
            if addressing is not None:
                cluster.addressing[n["id"]] = addressing
        return cluster

    @classmethod
    def from_data_dir(cls, data_dir: Path) -> LocalCluster:
        """The cluster in ``data_dir``, with the PIDs its running nodes wrote to their
        ``node.json`` (for a cluster started without a state file) and the proxy addressing
        its launcher left in ``addressing.json``."""
        layout = ClusterLayout.require(data_dir)
        cluster = cls(data_dir, layout)
        for spec in layout.nodes:
            directory = node_dir(cluster.data_dir, spec.id)
            addressing = _read_addressing(directory / ADDRESSING_JSON)
            if addressing is not None:
                cluster.addressing[spec.id] = addressing
            try:
                doc = json.loads((directory / "node.json").read_text())
            except (OSError, ValueError):
                continue  # never served, or stopped cleanly
            pid = doc.get("pid") if isinstance(doc, dict) else None
            if isinstance(pid, int) and is_our_node(pid, spec.id):
                cluster.pids[spec.id] = pid
        return cluster

    # ---- process control ---------------------------------------------------------
    def controller_address(self, spec: NodeSpec) -> str | None:
        """``HOST:PORT`` at which ``spec`` reaches the controller (None: it hosts it)."""
        controller = self.layout.controller_node()
        if spec is controller:
            return None
        override = self.addressing.get(spec.id)
        if override is not None and override.controller is not None:
            return "{}:{}".format(*override.controller)
        return f"127.0.0.1:{controller.port}"

    def _command(self, spec: NodeSpec, controller: str | None) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "txnchaos.harness.cli",
            "node",
            "--id",
            str(spec.id),
            "--roles",
            spec.role.replace("+", ","),
            "--data-dir",
            str(node_dir(self.data_dir, spec.id)),
            "--port",
            str(spec.port),
            "--metrics-port",
            str(spec.metrics_port),
        ]
        if controller is not None:
            cmd += ["--controller", controller]
        override = self.addressing.get(spec.id)
        if override is not None:
            if override.advertised is not None:
                host, port = override.advertised
                cmd += ["--advertised-host", host, "--advertised-port", str(port)]
            for peer, (host, port) in sorted(override.peers.items()):
                cmd += ["--peer", f"{peer}={host}:{port}"]
        coordinators = [n.id for n in self.layout.nodes if "coordinator" in n.roles]
        cmd += ["--coordinator-ids", ",".join(map(str, coordinators))]
        for pair in self.layout.settings:
            cmd += ["--set", pair]
        if self.layout.cpus is not None:
            cmd += ["--cpus", self.layout.cpus]
        return cmd

    def _spawn(self, spec: NodeSpec, controller: str | None) -> subprocess.Popen[bytes]:
        directory = node_dir(self.data_dir, spec.id)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "node.json").unlink(missing_ok=True)
        override = self.addressing.get(spec.id)
        if override is not None:
            _atomic_write(directory / ADDRESSING_JSON, override.to_state())
        else:
            (directory / ADDRESSING_JSON).unlink(missing_ok=True)
        logfile = open(directory / "node.log", "ab")  # noqa: SIM115 - handed to the child
        start = spawn if self.die_with_harness else subprocess.Popen
        try:
            proc = start(
                self._command(spec, controller),
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            logfile.close()
        self._procs[spec.id] = proc
        self.pids[spec.id] = proc.pid
        return proc

    def _wait_ready(self, spec: NodeSpec, proc: subprocess.Popen[bytes]) -> None:
        path = node_dir(self.data_dir, spec.id) / "node.json"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LaunchError(
                    f"node {spec.id} exited with code {proc.returncode} during start-up; "
                    f"see {path.parent / 'node.log'}:\n{_tail(path.parent / 'node.log')}"
                )
            if path.exists():
                try:
                    doc = json.loads(path.read_text())
                except ValueError:
                    doc = None
                if doc and doc.get("pid") == proc.pid:
                    spec.port = doc["port"]
                    spec.metrics_port = doc["metrics_port"]
                    if self.on_ready is not None:
                        self.on_ready(spec)
                    return
            time.sleep(0.05)
        raise LaunchError(f"node {spec.id} did not become ready within {READY_TIMEOUT_S:.0f}s")

    def _start_node(self, spec: NodeSpec) -> None:
        address = self.controller_address(spec)
        proc = self._spawn(spec, address)
        try:
            self._wait_ready(spec, proc)
        except LaunchError:
            if spec.port:
                # The remembered port may have been taken; try once more with a fresh one.
                spec.port = 0
                spec.metrics_port = 0
                proc = self._spawn(spec, address)
                self._wait_ready(spec, proc)
            else:
                raise
        self.layout.save(self.data_dir)

    def up(self) -> None:
        """Start every node; the controller-hosting node first. Returns when all serve."""
        controller = self.layout.controller_node()
        try:
            self._start_node(controller)
            others = [n for n in self.layout.nodes if n is not controller]
            for spec in others:
                proc = self._spawn(spec, self.controller_address(spec))
                self._procs[spec.id] = proc
            for spec in others:
                self._wait_ready_or_retry(spec)
            self.layout.save(self.data_dir)
        except BaseException:
            self.down()
            raise

    def _wait_ready_or_retry(self, spec: NodeSpec) -> None:
        try:
            self._wait_ready(spec, self._procs[spec.id])
        except LaunchError:
            if not spec.port:
                raise
            spec.port = 0
            spec.metrics_port = 0
            self._wait_ready(spec, self._spawn(spec, self.controller_address(spec)))

    def _signal(self, node_id: int, sig: int) -> bool:
        pid = self.pids.get(node_id)
        if pid is None or not is_our_node(pid, node_id):
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, node_id: int, timeout: float) -> bool:
        pid = self.pids.get(node_id)
        deadline = time.monotonic() + timeout
        while pid is not None and time.monotonic() < deadline:
            proc = self._procs.get(node_id)
            if proc is not None:
                if proc.poll() is not None:
                    return True
            elif not is_our_node(pid, node_id):
                return True
            time.sleep(0.05)
        return pid is None

    def stop_node(self, node_id: int, timeout: float = 15.0) -> None:
        if self._signal(node_id, signal.SIGTERM):
            self._signal(node_id, signal.SIGCONT)  # a paused node must run to see SIGTERM
            if not self._wait_gone(node_id, timeout):
                self._signal(node_id, signal.SIGKILL)
                self._wait_gone(node_id, 5.0)
        self.pids[node_id] = None

    def pause_node(self, node_id: int) -> bool:
        """SIGSTOP the node (if it is ours and alive); False when there was nothing to stop."""
        self.layout.node(node_id)
        return self._signal(node_id, signal.SIGSTOP)

    def resume_node(self, node_id: int) -> bool:
        """SIGCONT the node."""
        self.layout.node(node_id)
        return self._signal(node_id, signal.SIGCONT)

    def kill_node(self, node_id: int) -> None:
        self.layout.node(node_id)
        self._signal(node_id, signal.SIGKILL)
        self._wait_gone(node_id, 5.0)
        self.pids[node_id] = None

    def restart_node(self, node_id: int) -> None:
        spec = self.layout.node(node_id)
        self.stop_node(node_id)
        self._start_node(spec)

    def down(self) -> None:
        # Brokers first, then the controller, so brokers close cleanly.
        controller = self.layout.controller_node()
        for spec in self.layout.nodes:
            if spec is not controller:
                self._signal(spec.id, signal.SIGTERM)
        for spec in self.layout.nodes:
            if spec is not controller:
                self.stop_node(spec.id)
        self.stop_node(controller.id)
        for spec in self.layout.nodes:
            (node_dir(self.data_dir, spec.id) / ADDRESSING_JSON).unlink(missing_ok=True)

    # ---- the state file ------------------------------------------------------------
    def advertised(self, spec: NodeSpec) -> tuple[str, int]:
        """The address clients are told for ``spec`` (a proxy's when proxied)."""
        override = self.addressing.get(spec.id)
        if override is not None and override.advertised is not None:
            return override.advertised
        return "127.0.0.1", spec.port

    def state(self) -> dict[str, Any]:
        brokers = [n for n in self.layout.nodes if "broker" in n.roles]
        nodes = []
        for n in self.layout.nodes:
            entry: dict[str, Any] = {
                "id": n.id,
                "role": n.role,
                "pid": self.pids.get(n.id),
                "host": "127.0.0.1",
                "port": n.port,
                "metrics_port": n.metrics_port,
            }
            override = self.addressing.get(n.id)
            if override is not None:
                entry.update(override.to_state())
            nodes.append(entry)
        return {
            "bootstrap": ",".join("{}:{}".format(*self.advertised(n)) for n in brokers),
            "data_dir": str(self.data_dir),
            "nodes": nodes,
        }

    def write_state(self, state_file: Path) -> None:
        state_file.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(state_file, self.state())


def _check_state(state: Any, state_file: Path) -> list[dict[str, Any]]:
    """The node entries of a state file's document, after checking the fields read from it
    (a :class:`LaunchError` naming the file and field otherwise)."""
    what = f"state file {state_file}"
    if not isinstance(state, dict) or not isinstance(state.get("data_dir"), str):
        raise LaunchError(
            f"{what} has no 'data_dir' string: it is not what `cluster up --state` writes"
        )
    nodes = state.get("nodes", [])
    if not isinstance(nodes, list):
        raise LaunchError(f"{what}: 'nodes' should be a list")
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or not _is_int(n.get("id")):
            raise LaunchError(f"{what}: nodes[{i}] should be an object with an integer 'id'")
        if n.get("pid") is not None and not _is_int(n["pid"]):
            raise LaunchError(f"{what}: nodes[{i}].pid should be an integer or null")
    return nodes


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_addressing(path: Path) -> NodeAddressing | None:
    """A node's ``addressing.json`` (None: there is none, the node is not proxied)."""
    try:
        return NodeAddressing.from_state(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise LaunchError(f"cannot read {path}: {exc}") from exc


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
