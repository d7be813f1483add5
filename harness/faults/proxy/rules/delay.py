"""``delay``: hold matching frames for ``ms`` (plus jitter) before they go on."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from .base import FrameRuleBase
from .runtime import RuleState, sleep_unless_removed

if TYPE_CHECKING:
    from ..link import OpenFault, Request, Response


class DelayRule(FrameRuleBase):
    """Delay matching frames by ``ms`` (+ jitter drawn from the rule's seeded RNG).

    With ``head_of_line`` (default, like a slow TCP path) later frames of the same
    connection and direction wait behind the delayed one; without it, later requests
    overtake it (the proxy still returns responses to the client in request order).
    Delays of several rules on one frame add up (one fault log record).
    """

    kind: Literal["delay"] = "delay"
    ms: float = Field(ge=0)
    jitter: Literal["none", "uniform", "normal"] = "none"
    jitter_ms: float = Field(default=0.0, ge=0)
    head_of_line: bool = True

    stage: ClassVar[int] = 40  # last: whatever the earlier stages left is delayed
    acts_on_responses: ClassVar[bool] = True

    def draw_ms(self, rng: random.Random) -> float:
        if self.jitter == "uniform":
            value = self.ms + rng.uniform(-self.jitter_ms, self.jitter_ms)
        elif self.jitter == "normal":
            value = rng.gauss(self.ms, self.jitter_ms)
        else:
            value = self.ms
        return max(0.0, value)

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        ms, params = _draw(states)
        fault = request.open_fault("delay", params)
        if all(s.rule.head_of_line for s in states):
            await sleep_unless_removed(ms / 1000.0, states)
            request.close_fault(fault)
            return False
        request.park()
        request.spawn(_forward_later(ms, states, fault, request))
        return True

    @classmethod
    async def on_response(cls, states: list[RuleState], response: Response) -> None:
        ms, params = _draw(states)
        fault = response.open_fault("delay", params)
        await sleep_unless_removed(ms / 1000.0, states)
        response.close_fault(fault)


def _draw(states: list[RuleState]) -> tuple[float, dict[str, object]]:
    ms = sum(s.rule.draw_ms(s.rng) for s in states)
    return ms, {**states[0].rule.params(), "applied_ms": round(ms, 3)}


async def _forward_later(
    ms: float, states: list[RuleState], fault: OpenFault, request: Request
) -> None:
    """A delay without head-of-line blocking: later requests go on meanwhile."""
    try:
        await sleep_unless_removed(ms / 1000.0, states)
    finally:
        request.unpark()
    request.close_fault(fault)
    request.forward()
