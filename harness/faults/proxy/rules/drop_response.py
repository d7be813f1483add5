"""``drop_response``: the upstream processes the request; the client never sees the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from .base import FrameRuleBase
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import Request


class DropResponseRule(FrameRuleBase):
    """The upstream processes the request; its response is swallowed."""

    kind: Literal["drop_response"] = "drop_response"
    requests_only: ClassVar[bool] = True

    stage: ClassVar[int] = 10

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        request.swallow_response("drop_response", states[0].rule.params())
        return False
