"""``reset``: a link whose connections are reset and refused."""

from __future__ import annotations

from typing import Literal

from .base import LinkRuleBase
from .runtime import PolicyParts, RuleState


class ResetRule(LinkRuleBase):
    """Close the link's connections (TCP RST) and refuse new ones while active."""

    kind: Literal["reset"] = "reset"

    def shape_link(self, st: RuleState, link: str, parts: PolicyParts) -> None:
        parts.reset = True
