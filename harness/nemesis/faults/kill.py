"""``kill``: SIGKILL a node, restart it after ``duration``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .base import FaultContext
from .process import ProcessFault

if TYPE_CHECKING:
    from ..schedule import ScheduledFault


class KillFault(ProcessFault):
    name = "kill"
    heals = True
    needs_duration = True

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        assert fault.node is not None
        started = time.time()
        context.handle.kill(fault.node)
        context.activate(index, fault, started, fault.node, f"node {fault.node} killed")

    def heal(self, context: FaultContext, undo: Any) -> None:
        context.handle.restart(undo)
