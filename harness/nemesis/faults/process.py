"""Faults done to a node's process through the launcher (which logs them)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from .base import Family, FaultBase, ScheduleError, TargetField

if TYPE_CHECKING:
    from ..schedule import RandomNemesis, Targets, TimedAction


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
