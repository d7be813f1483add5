"""The local launcher: the project's nodes as processes on this machine.

Layout of a cluster data directory::

    DIR/cluster.json        the layout (brokers, coordinators, settings, ports) so that
                            `cluster up` on an existing DIR restarts the same cluster
    DIR/node-<id>/          one node's data: partitions/, controller/, groups/, ...
    DIR/node-<id>/node.json written by the node when it serves (pid and ports)
    DIR/node-<id>/node.log  the node's output

The state file (``--state FILE``) is the contract with later tooling:
``{"bootstrap": "127.0.0.1:P1,...", "data_dir": DIR, "nodes": [{"id", "role", "pid",
"host", "port", "metrics_port"}, ...]}``.

Nodes pick free ports themselves on first start (port 0) and keep them across
restarts; if a remembered port has been taken in the meantime the node gets a new
one and the state file says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

COORDINATOR_ID_BASE = 1001
READY_TIMEOUT_S = 60.0


class LaunchError(RuntimeError):
    pass


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
class ClusterLayout:
    brokers: int
    coordinators: int
    settings: list[str] = field(default_factory=list)
    nodes: list[NodeSpec] = field(default_factory=list)

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
            "nodes": [asdict(n) for n in self.nodes],
        }
        _atomic_write(data_dir / "cluster.json", doc)

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
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise LaunchError(f"{path} is not a valid cluster layout: {exc}") from exc


def _atomic_write(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def node_dir(data_dir: Path, node_id: int) -> Path:
    return data_dir / f"node-{node_id}"


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
    def __init__(self, data_dir: Path, layout: ClusterLayout) -> None:
        self.data_dir = data_dir.resolve()
        self.layout = layout
        self.pids: dict[int, int | None] = {n.id: None for n in layout.nodes}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # ---- construction --------------------------------------------------------------
    @classmethod
    def prepare(
        cls, data_dir: Path, brokers: int, coordinators: int, settings: list[str]
    ) -> LocalCluster:
        data_dir.mkdir(parents=True, exist_ok=True)
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
        cluster = cls(data_dir, layout)
        layout.save(data_dir)
        return cluster

    @classmethod
    def from_state(cls, state_file: Path) -> LocalCluster:
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError) as exc:
            raise LaunchError(f"cannot read state file {state_file}: {exc}") from exc
        data_dir = Path(state["data_dir"])
        layout = ClusterLayout.load(data_dir)
        if layout is None:
            raise LaunchError(f"{data_dir} has no cluster.json; is it a txnchaos cluster?")
        cluster = cls(data_dir, layout)
        for n in state.get("nodes", []):
            cluster.pids[n["id"]] = n.get("pid")
        return cluster

    # ---- process control ---------------------------------------------------------
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
        coordinators = [n.id for n in self.layout.nodes if "coordinator" in n.roles]
        cmd += ["--coordinator-ids", ",".join(map(str, coordinators))]
        for pair in self.layout.settings:
            cmd += ["--set", pair]
        return cmd

    def _spawn(self, spec: NodeSpec, controller: str | None) -> subprocess.Popen[bytes]:
        directory = node_dir(self.data_dir, spec.id)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "node.json").unlink(missing_ok=True)
        logfile = open(directory / "node.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
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
                    return
            time.sleep(0.05)
        raise LaunchError(f"node {spec.id} did not become ready within {READY_TIMEOUT_S:.0f}s")

    def _start_node(self, spec: NodeSpec) -> None:
        controller = self.layout.controller_node()
        address = None if spec is controller else f"127.0.0.1:{controller.port}"
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
                proc = self._spawn(spec, f"127.0.0.1:{controller.port}")
                self._procs[spec.id] = proc
            for spec in others:
                self._wait_ready_or_retry(spec, controller)
            self.layout.save(self.data_dir)
        except BaseException:
            self.down()
            raise

    def _wait_ready_or_retry(self, spec: NodeSpec, controller: NodeSpec) -> None:
        try:
            self._wait_ready(spec, self._procs[spec.id])
        except LaunchError:
            if not spec.port:
                raise
            spec.port = 0
            spec.metrics_port = 0
            self._wait_ready(spec, self._spawn(spec, f"127.0.0.1:{controller.port}"))

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
        if self._signal(node_id, signal.SIGTERM) and not self._wait_gone(node_id, timeout):
            self._signal(node_id, signal.SIGKILL)
            self._wait_gone(node_id, 5.0)
        self.pids[node_id] = None

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

    # ---- the state file ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        brokers = [n for n in self.layout.nodes if "broker" in n.roles]
        return {
            "bootstrap": ",".join(f"127.0.0.1:{n.port}" for n in brokers),
            "data_dir": str(self.data_dir),
            "nodes": [
                {
                    "id": n.id,
                    "role": n.role,
                    "pid": self.pids.get(n.id),
                    "host": "127.0.0.1",
                    "port": n.port,
                    "metrics_port": n.metrics_port,
                }
                for n in self.layout.nodes
            ],
        }

    def write_state(self, state_file: Path) -> None:
        state_file.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(state_file, self.state())


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
