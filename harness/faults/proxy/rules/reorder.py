"""``reorder``: a request waits until a later one has overtaken it."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from .base import FrameRuleBase
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import OpenFault, Request


class ReorderRule(FrameRuleBase):
    """Hold a matching request until a later matching request (on any connection of
    the rule's links) has been forwarded, or for at most ``max_hold_ms``."""

    kind: Literal["reorder"] = "reorder"
    requests_only: ClassVar[bool] = True
    max_hold_ms: float = Field(default=1000.0, gt=0)

    stage: ClassVar[int] = 30

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        st = states[0]
        held = ReorderedRequest(st, request, request.open_fault("reorder", st.rule.params()))
        request.triggers = ()  # a held request releases nothing when it finally goes
        request.park(held)
        st.held.append(held)
        loop = asyncio.get_running_loop()
        held.timer = loop.call_later(st.rule.max_hold_ms / 1000.0, held.release, "max_hold")
        return True


@dataclass(eq=False)
class ReorderedRequest:
    """A request held by a reorder rule (released by the link or by its timer)."""

    owner: RuleState
    request: Request
    fault: OpenFault
    timer: asyncio.TimerHandle | None = None
    released: bool = False

    def _settle(self) -> bool:
        if self.released:
            return False
        self.released = True
        if self.timer is not None:
            self.timer.cancel()
        with contextlib.suppress(ValueError):
            self.owner.held.remove(self)
        return True

    def release(self, why: str) -> None:
        if self._settle():
            self.request.unpark(self)
            self.request.close_fault(self.fault, released=why)
            self.request.forward()

    def abandon(self, outcome: str) -> None:
        """Its connection closed: the request is never sent."""
        if self._settle():
            self.fault.close(outcome=outcome)
