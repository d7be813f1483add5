"""``throttle``: a link with limited bandwidth."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import LinkRuleBase
from .runtime import PolicyParts, RuleState, TokenBucket


class ThrottleRule(LinkRuleBase):
    """Limit the link's bandwidth (shared by its connections), per direction."""

    kind: Literal["throttle"] = "throttle"
    bytes_per_second: int = Field(gt=0)

    def shape_link(self, st: RuleState, link: str, parts: PolicyParts) -> None:
        if st.covers("request"):
            parts.throttle_request.append(self._bucket(st, link, "request"))
        if st.covers("response"):
            parts.throttle_response.append(self._bucket(st, link, "response"))

    def _bucket(self, st: RuleState, link: str, direction: str) -> TokenBucket:
        key = (link, direction)
        bucket = st.buckets.get(key)
        if bucket is None:
            bucket = st.buckets[key] = TokenBucket(self.bytes_per_second)
        return bucket
