"""The ``local`` launcher: the project's nodes as processes on this machine.

It wraps :class:`~.local.LocalCluster` (the ``txnchaos cluster up`` machinery): node data
lives in ``RUN_DIR/cluster`` (``cluster.json``, ``node-<id>/``), and the cluster state
file is ``RUN_DIR/cluster-state.json`` (the ``--state`` contract, readable by
``txnchaos cluster status``).

Proxied (``ClusterSpec.proxied``, the default): a :class:`~.proxied.ProxyMesh` is made
first; every node is started with ``--advertised-host/--advertised-port`` of its
``client->n<id>`` proxy, ``--peer B=`` the ``n<id>->n<B>`` proxy for every other node B
and ``--controller`` the proxy to the controller's node; as each node writes
``node.json`` (its real port) the links leading to it are pointed there. Nodes keep
their ports across restarts (and the proxies are re-pointed if a port had to change).

Node faults: SIGKILL, SIGSTOP/SIGCONT and restart (SIGTERM, then the same command:
same ports, same data), only ever to PIDs this launcher started and that still are our
node processes (``is_our_node``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import KILL, PAUSE, RESTART, RESUME, TEAR, ClusterHandle, ClusterSpec, NodeInfo
from .errors import LaunchError
from .local import ALL_CPUS, LocalCluster, NodeAddressing, NodeSpec, node_dir
from .proxied import ProxyMesh

STATE_FILE = "cluster-state.json"


class LocalHandle(ClusterHandle):
    launcher = "local"
    capabilities = frozenset({KILL, PAUSE, RESUME, RESTART, TEAR})

    def __init__(self, run_dir: Path, spec: ClusterSpec, cluster: LocalCluster) -> None:
        super().__init__(run_dir, spec)
        self.cluster = cluster
        self.mesh: ProxyMesh | None = None

    @property
    def bootstrap(self) -> str:
        return str(self.cluster.state()["bootstrap"])

    @property
    def nodes(self) -> list[NodeInfo]:
        out = []
        for n in self.cluster.layout.nodes:
            pid = self.cluster.pids.get(n.id)
            out.append(
                NodeInfo(
                    id=n.id,
                    role=n.role,
                    host="127.0.0.1",
                    port=n.port,
                    advertised="{}:{}".format(*self.cluster.advertised(n)),
                    metrics_url=f"http://127.0.0.1:{n.metrics_port}/metrics"
                    if n.metrics_port
                    else None,
                    pid=pid,
                )
            )
        return out

    def write_state(self) -> None:
        self.cluster.write_state(self.run_dir / STATE_FILE)

    # ---- node faults ---------------------------------------------------------------
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
        return node_dir(self.cluster.data_dir, node_id)

    def _restart(self, node_id: int) -> None:
        self.cluster.restart_node(node_id)
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
        }


class LocalLauncher:
    name = "local"

    def start(self, spec: ClusterSpec, run_dir: Path) -> LocalHandle:
        run_dir = run_dir.resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        cluster = LocalCluster.prepare(
            run_dir / "cluster",
            spec.brokers,
            spec.coordinators,
            list(spec.settings),
            cpus=spec.cpus or ALL_CPUS,  # a rerun on the same directory follows the scenario
        )
        cluster.die_with_harness = True  # a run's nodes die with it, also on kill -9
        handle = LocalHandle(run_dir, spec, cluster)
        try:
            if spec.proxied:
                mesh = ProxyMesh([n.id for n in cluster.layout.nodes], run_dir, seed=spec.seed)
                handle.mesh = mesh
                handle.fleet = mesh.fleet
                cluster.addressing = _addressing(cluster, mesh)

                def on_ready(node: NodeSpec) -> None:
                    mesh.point(node.id, "127.0.0.1", node.port)

                cluster.on_ready = on_ready
            cluster.up()
            handle.write_state()
        except BaseException:
            handle.stop()
            raise
        return handle


def _addressing(cluster: LocalCluster, mesh: ProxyMesh) -> dict[int, NodeAddressing]:
    controller = cluster.layout.controller_node().id
    return {
        n.id: NodeAddressing(
            advertised=mesh.advertised(n.id),
            controller=None if n.id == controller else mesh.peer_address(n.id, controller),
            peers=mesh.peers_of(n.id),
        )
        for n in cluster.layout.nodes
    }
