"""``restart``: a clean restart of a node (nothing to heal)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import FaultContext
from .process import ProcessFault

if TYPE_CHECKING:
    from ..schedule import ScheduledFault


class RestartFault(ProcessFault):
    name = "restart"
    instant = True

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        assert fault.node is not None
        context.handle.restart(fault.node)
