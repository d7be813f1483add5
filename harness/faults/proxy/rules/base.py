"""What every proxy rule has: link selection, direction, time window, and the hooks
through which a rule tells the link what to do.

Frame rules select frames (API, transactional id, producer id, ``nth``,
``probability``) and act on each one they apply to through :meth:`FrameRuleBase.on_request`
and :meth:`FrameRuleBase.on_response`; link rules shape the whole link while active
through :meth:`LinkRuleBase.shape_link`. The link itself only moves bytes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..apis import Targets, api_key_of, api_name

if TYPE_CHECKING:
    from ..link import Request, Response
    from .runtime import PolicyParts, RuleState

Direction = Literal["request", "response", "both"]


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


class Window(BaseModel):
    """When a rule is active: ``[start, end)``; either bound may be open.

    ``clock: relative`` counts seconds from the fleet's start; ``absolute`` uses
    seconds since the epoch.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: float | None = None
    end: float | None = None
    clock: Literal["relative", "absolute"] = "relative"

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValueError(f"window end {self.end} is before its start {self.start}")
        return self

    def bounds(self, origin: float) -> tuple[float, float]:
        """Absolute (epoch seconds) bounds, with open ends as +-inf."""
        shift = origin if self.clock == "relative" else 0.0
        lo = -float("inf") if self.start is None else self.start + shift
        hi = float("inf") if self.end is None else self.end + shift
        return lo, hi


class RuleBase(BaseModel):
    """Fields and hooks shared by every rule kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    if TYPE_CHECKING:
        kind: str  # each kind declares it as a Literal (the discriminator)

    id: str = Field(default_factory=_new_id)
    link: str | list[str] = "*"
    direction: Direction = "request"
    window: Window | None = None

    logs_spans: ClassVar[bool] = False
    """True for link rules: the fleet logs one fault per (rule, link) span of activity."""

    @field_validator("link")
    @classmethod
    def _links(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list) and not v:
            raise ValueError("link: give at least one name or glob")
        return v

    def matches_link(self, name: str) -> bool:
        patterns = [self.link] if isinstance(self.link, str) else self.link
        return any(fnmatchcase(name, p) for p in patterns)

    def params(self) -> dict[str, Any]:
        """The kind-specific parameters (for the fault log)."""
        skip = set(RuleBase.model_fields) | set(FrameRuleBase.model_fields) | {"kind"}
        return {"rule": self.id, **self.model_dump(exclude=skip, mode="json")}

    def to_yaml_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["kind"] = self.kind
        return data

    def shape(self, st: RuleState, link: str, now: float, parts: PolicyParts) -> None:
        """Add what this installed rule asks of ``link`` now to the policy being built."""
        raise NotImplementedError


class FrameRuleBase(RuleBase):
    """A rule acting on single frames that pass its filters."""

    api: list[int] | None = None
    transactional_id: str | None = None
    producer_id: int | None = None
    nth: int | None = Field(default=None, ge=1)
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    seed: int | None = None

    stage: ClassVar[int] = 0
    """Order among the kinds applying to one request: a lower stage acts first."""
    acts_on_responses: ClassVar[bool] = False
    """True if :meth:`on_response` does something (the link then inspects responses)."""
    requests_only: ClassVar[bool] = False
    """True for kinds that act on a request as a whole (drop it, hold it, copy it, edit it):
    their ``direction`` must be ``request``."""

    @model_validator(mode="after")
    def _request_direction(self) -> FrameRuleBase:
        if self.requests_only and self.direction != "request":
            raise ValueError(f"{self.kind} rules match requests: direction must be 'request'")
        return self

    @field_validator("api", mode="before")
    @classmethod
    def _apis(cls, v: Any) -> Any:
        if v is None:
            return None
        items = v if isinstance(v, list | tuple) else [v]
        return [api_key_of(x) for x in items]

    def needs_targets(self) -> bool:
        return self.transactional_id is not None or self.producer_id is not None

    def filters_match(self, api_key: int, targets: Callable[[], Targets]) -> bool:
        if self.api is not None and api_key not in self.api:
            return False
        if self.transactional_id is None and self.producer_id is None:
            return True
        t = targets()
        if self.transactional_id is not None and not any(
            fnmatchcase(x, self.transactional_id) for x in t.transactional_ids
        ):
            return False
        return self.producer_id is None or self.producer_id in t.producer_ids

    def to_yaml_dict(self) -> dict[str, Any]:
        data = super().to_yaml_dict()
        if self.api is not None:
            data["api"] = [api_name(k) for k in self.api]
        return data

    def shape(self, st: RuleState, link: str, now: float, parts: PolicyParts) -> None:
        # Frame rules switch the link to frame inspection as soon as they are installed
        # (not only once their window opens) so that the switch happens at a frame
        # boundary well before the first frame must be matched.
        if st.covers("request"):
            parts.request_rules.append(st)
        if self.acts_on_responses and st.covers("response"):
            parts.response_rules.append(st)

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        """Act on a request that ``states`` (installed rules of this kind) apply to.

        Returns True if the rule took the frame over: the link then neither forwards
        it nor asks later stages.
        """
        return False

    @classmethod
    async def on_response(cls, states: list[RuleState], response: Response) -> None:
        """Act on a response to a request that ``states`` apply to, before delivery."""


class LinkRuleBase(RuleBase):
    """A rule acting on every byte of its links while active."""

    direction: Direction = "both"

    logs_spans: ClassVar[bool] = True

    def shape(self, st: RuleState, link: str, now: float, parts: PolicyParts) -> None:
        if st.active(now):
            self.shape_link(st, link, parts)

    def shape_link(self, st: RuleState, link: str, parts: PolicyParts) -> None:
        """Set what the active rule does to ``link`` (discard, reset, throttle)."""
        raise NotImplementedError
