"""``pause``: freeze a node (SIGSTOP / docker pause), resume it after ``duration``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .base import FaultContext
from .process import ProcessFault

if TYPE_CHECKING:
    from ..schedule import ScheduledFault


class PauseFault(ProcessFault):
    name = "pause"
    heals = True
    needs_duration = True

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        assert fault.node is not None
        started = time.time()
        context.handle.pause(fault.node)
        context.activate(index, fault, started, fault.node, f"node {fault.node} paused")

    def heal(self, context: FaultContext, undo: Any) -> None:
        context.handle.resume(undo)
