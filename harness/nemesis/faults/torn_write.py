"""``torn_write``: a power loss on a node. The node is killed (SIGKILL / docker kill), its files
get the torn tail an interrupted write leaves (``harness/faults/torn_tail.py``: a half-written
batch after each partition's last one, half an aborted-index entry, the newest producer
snapshot lost, a coordinator state-log frame cut short), and it is restarted after
``duration``: its recovery must cut every torn tail off and serve exactly what was
acknowledged. On the launchers that can tear a node's files (local and docker for the
project's nodes, kafka for Apache Kafka's): elsewhere it fails before killing anything."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...launch.base import TEAR
from .process import LastingProcessFault

if TYPE_CHECKING:
    from ...launch.base import ClusterHandle
    from ..schedule import ScheduledFault
    from .base import FaultContext


class TornWriteFault(LastingProcessFault):
    name = "torn_write"
    done = "killed and its files torn"

    def act(self, handle: ClusterHandle, node: int) -> None:
        handle.kill(node)

    def undo(self, handle: ClusterHandle, node: int) -> None:
        handle.restart(node)

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        assert fault.node is not None
        context.handle.require(TEAR, fault.node)  # before the kill: else the node stays down
        started = time.time()
        context.handle.kill(fault.node)
        what = summary(context.handle.tear(fault.node))
        context.activate(
            index, fault, started, fault.node, f"node {fault.node} {self.done}: {what}"
        )


def summary(torn: list[str]) -> str:
    """What :func:`~txnchaos.harness.faults.torn_tail.tear_node` did, counted by kind."""
    if not torn:
        return "nothing to tear"
    kinds = {
        "batches": sum(" torn " in t for t in torn),
        "index entries": sum("half an entry" in t for t in torn),
        "snapshots": sum(t.endswith(" emptied") for t in torn),
        "state-log frames": sum(t.endswith("cut short") for t in torn),
    }
    return ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
