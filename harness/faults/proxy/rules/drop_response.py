"""``drop_response``: the upstream processes the request; the client never sees the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import model_validator

from .base import FrameRuleBase, request_only
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import Request


class DropResponseRule(FrameRuleBase):
    """The upstream processes the request; its response is swallowed."""

    kind: Literal["drop_response"] = "drop_response"

    stage: ClassVar[int] = 10

    @model_validator(mode="after")
    def _dir(self) -> DropResponseRule:
        request_only(self)
        return self

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        request.swallow_response("drop_response", states[0].rule.params())
        return False
