"""``duplicate``: the upstream gets extra copies of a request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from .base import FrameRuleBase
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import Request


class DuplicateRule(FrameRuleBase):
    """Send the request ``1 + copies`` times upstream; the client sees one response."""

    kind: Literal["duplicate"] = "duplicate"
    requests_only: ClassVar[bool] = True
    copies: int = Field(default=1, ge=1, le=16)

    stage: ClassVar[int] = 20

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        copies = sum(s.rule.copies for s in states)
        params = states[0].rule.params()
        request.after_forward(lambda sent: _send_copies(sent, copies, params))
        return False


def _send_copies(request: Request, copies: int, params: dict[str, Any]) -> None:
    """The copies go under private correlation ids; their responses are swallowed."""
    for i in range(copies):
        private = request.private_correlation_id()
        fault = request.open_fault(
            "duplicate", {**params, "copy": i + 1, "private_correlation_id": private}
        )
        request.send_copy(private, fault, outcome="duplicate response swallowed")
