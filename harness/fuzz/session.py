"""One fuzz session end to end: the cluster (started here, or given), the seeds built
from what its nodes serve, the run, and the cluster stopped again."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

from ..launch.local import LocalCluster, node_dir
from ..launch.owner import owned_temp_dir
from .discover import api_ranges, learn_producers, plausible_values
from .findings import Finding
from .health import Health, LogWatch
from .runner import FuzzOptions, Restart, Runner, Summary, replay
from .seeds import Plausible, build_corpus
from .target import Node, Outcome
from .typed import TypedContext


@dataclasses.dataclass
class ClusterChoice:
    """Where the nodes come from: a cluster of our own (``brokers``/``coordinators``,
    in ``data_dir`` or a temporary directory), or ``bootstrap`` addresses (no pid, no
    log: health is then what the node answers)."""

    brokers: int = 1
    coordinators: int = 1
    data_dir: Path | None = None
    bootstrap: list[tuple[str, int]] | None = None
    settings: list[str] = dataclasses.field(default_factory=list)


def local_nodes(cluster: LocalCluster) -> list[Node]:
    out = []
    for entry in sorted(cluster.state()["nodes"], key=lambda n: n["id"]):
        out.append(
            Node(
                node_id=entry["id"],
                role=entry["role"],
                host=entry["host"],
                port=entry["port"],
                pid=entry["pid"],
                log=node_dir(cluster.data_dir, entry["id"]) / "node.log",
            )
        )
    return out


class Session:
    """A context manager holding the nodes to fuzz (and the cluster, if ours)."""

    def __init__(self, choice: ClusterChoice) -> None:
        self.choice = choice
        self.cluster: LocalCluster | None = None
        self._tmp: Path | None = None
        self.nodes: list[Node] = []

    def __enter__(self) -> Session:
        choice = self.choice
        if choice.bootstrap is not None:
            self.nodes = [
                Node(node_id=i, role="node", host=h, port=p)
                for i, (h, p) in enumerate(choice.bootstrap)
            ]
            return self
        data_dir = choice.data_dir
        if data_dir is None:
            # named after this harness: `txnchaos cleanup` removes it if we are killed
            self._tmp = data_dir = owned_temp_dir("fuzz-")
        self.cluster = LocalCluster.prepare(
            data_dir, choice.brokers, choice.coordinators, choice.settings
        )
        self.cluster.up()
        self.nodes = local_nodes(self.cluster)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cluster is not None:
            self.cluster.down()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    async def restart(self, node: Node) -> Node:
        assert self.cluster is not None
        cluster = self.cluster
        await asyncio.to_thread(cluster.restart_node, node.node_id)
        return next(n for n in local_nodes(cluster) if n.node_id == node.node_id)

    def node_for_role(self, role: str, node_id: int) -> Node:
        """The node a replay goes to: the one with ``node_id`` if it has ``role``, else
        the first with that role, else the first node."""
        for n in self.nodes:
            if n.node_id == node_id and n.role == role:
                return n
        return next((n for n in self.nodes if n.role == role), self.nodes[0])


async def fuzz(
    session: Session, options: FuzzOptions, progress: Callable[[str], None] | None
) -> Summary:
    restart = session.restart if session.cluster is not None else None
    return await fuzz_nodes(session.nodes, options, progress, restart)


async def typed_context(
    nodes: list[Node],
    ranges: list[dict[int, tuple[int, int]]],
    plausible: Plausible,
    options: FuzzOptions,
) -> TypedContext:
    """What typed cases name (other producers are learnt only when typed cases run)."""
    if options.strategy == "bytes":
        return TypedContext(plausible)
    return TypedContext(plausible, await learn_producers(nodes, ranges, plausible))


async def fuzz_nodes(
    nodes: list[Node],
    options: FuzzOptions,
    progress: Callable[[str], None] | None = None,
    restart: Restart | None = None,
) -> Summary:
    """Learn what ``nodes`` serve, build the seeds, run the cases."""
    ranges = [await api_ranges(n) for n in nodes]
    plausible = await plausible_values(nodes, ranges)
    corpora = [build_corpus(r, plausible) for r in ranges]
    typed = await typed_context(nodes, ranges, plausible, options)
    if progress is not None:
        seeds = sum(len(c) for c in corpora)
        progress(
            f"fuzz: {len(nodes)} node(s), {seeds} seed frames "
            f"(every version of every API each node serves), seed {options.seed}, "
            f"strategy {options.strategy}"
        )
    runner = Runner(nodes, corpora, options, restart=restart, progress=progress, typed=typed)
    return await runner.run()


async def replay_finding(
    session: Session, finding: Finding, timeout: float
) -> tuple[Node, list[Outcome], Health, list[str]]:
    node = session.node_for_role(finding.role, finding.node_id)
    watch = LogWatch(node.log) if node.log is not None else None
    outcomes, health, problems = await replay(finding, node, timeout, watch)
    return node, outcomes, health, problems


__all__ = ["ClusterChoice", "Session", "fuzz", "fuzz_nodes", "local_nodes", "replay_finding"]
