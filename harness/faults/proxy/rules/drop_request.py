"""``drop_request``: the upstream never sees the request."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import model_validator

from .base import FrameRuleBase, request_only
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import Request


class DropRequestRule(FrameRuleBase):
    """The upstream never sees the request; the client gets no response and times out."""

    kind: Literal["drop_request"] = "drop_request"

    stage: ClassVar[int] = 0  # first: a dropped request meets no other rule

    @model_validator(mode="after")
    def _dir(self) -> DropRequestRule:
        request_only(self)
        return self

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        request.record("drop_request", states[0].rule.params())
        request.drop()
        return True
