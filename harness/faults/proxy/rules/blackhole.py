"""``blackhole``: a link that accepts bytes and delivers none."""

from __future__ import annotations

from typing import Literal

from .base import LinkRuleBase
from .runtime import PolicyParts, RuleState


class BlackholeRule(LinkRuleBase):
    """The link accepts bytes and forwards nothing (in ``direction``), frame-aligned."""

    kind: Literal["blackhole"] = "blackhole"

    def shape_link(self, st: RuleState, link: str, parts: PolicyParts) -> None:
        parts.blackhole_request |= st.covers("request")
        parts.blackhole_response |= st.covers("response")
