"""``drop_request``: the upstream never sees the request."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from .base import FrameRuleBase
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import Request


class DropRequestRule(FrameRuleBase):
    """The upstream never sees the request; the client gets no response and times out."""

    kind: Literal["drop_request"] = "drop_request"
    requests_only: ClassVar[bool] = True

    stage: ClassVar[int] = 0  # first: a dropped request meets no other rule

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        request.record("drop_request", states[0].rule.params())
        request.drop()
        return True
