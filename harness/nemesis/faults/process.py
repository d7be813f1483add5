"""Faults done to a node's process through the launcher (which logs them)."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from .base import Family, FaultBase, FaultContext, ScheduleError, TargetField

if TYPE_CHECKING:
    from ...launch.base import ClusterHandle
    from ..schedule import RandomNemesis, ScheduledFault, Targets, TimedAction


class ProcessFault(FaultBase):
    """A fault on one node (``node``); not possible on a cluster the harness does not run."""

    family: Family = "process"
    targets: TargetField = "nodes"

    def check_action(self, action: TimedAction) -> None:
        if action.node is None:
            raise ValueError(f"a {self.name} action needs `node`")
        super().check_action(action)
        if self.needs_duration and action.duration <= 0:
            raise ValueError(f"a {self.name} action needs a positive `duration`")

    def check_targets(self, action: TimedAction, targets: Targets) -> None:
        if not targets.node_faults:
            raise ScheduleError(f"this cluster does not support node faults ({self.name})")
        if action.node not in targets.nodes:
            raise ScheduleError(f"action at {action.at}s: no node {action.node}")

    def usable(self, targets: Targets) -> bool:
        return targets.node_faults and bool(targets.nodes)

    def random_target(
        self, rng: random.Random, gen: RandomNemesis, targets: Targets
    ) -> dict[str, Any]:
        return {"node": rng.choice(sorted(targets.nodes))}


class LastingProcessFault(ProcessFault):
    """A node fault that lasts ``duration``: done to the node now (``act``), undone when
    it heals (``undo``); ``done`` words it in the fault log (``node 2 killed``)."""

    heals = True
    needs_duration = True
    done = ""

    def act(self, handle: ClusterHandle, node: int) -> None:
        raise NotImplementedError

    def undo(self, handle: ClusterHandle, node: int) -> None:
        raise NotImplementedError

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        assert fault.node is not None
        started = time.time()
        self.act(context.handle, fault.node)
        context.activate(index, fault, started, fault.node, f"node {fault.node} {self.done}")

    def heal(self, context: FaultContext, undo: Any) -> None:
        self.undo(context.handle, undo)
