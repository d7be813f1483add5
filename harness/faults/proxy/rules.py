"""Fault rules for the proxy: typed models (the scenario YAML's ``faults`` entries) and
the matcher that decides, frame by frame, which rules apply.

Every rule has a ``kind`` (the discriminator) and selects links by name or glob
(``link``, one pattern or a list), a ``direction`` and an optional time ``window``.
Frame rules (``delay``, ``drop_request``, ``drop_response``, ``reorder``,
``duplicate``) can further select frames by API (``api``: names or numbers),
``transactional_id`` (glob), ``producer_id``, and apply only to the ``nth`` match
and/or with a ``probability``. Link rules (``blackhole``, ``reset``, ``throttle``)
apply to every byte of the link while active.

Example (YAML)::

    - kind: delay
      link: "client->*"
      api: [Produce, EndTxn]
      transactional_id: "txn-*"
      ms: 200
      jitter: uniform
      jitter_ms: 50
      window: {start: 10, end: 40}          # seconds after the fleet started
    - kind: blackhole
      link: "n1->n2"
      window: {start: 1700000000.0, end: 1700000030.0, clock: absolute}
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from .apis import Targets, api_key_of, api_name

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


class _RuleBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(default_factory=_new_id)
    link: str | list[str] = "*"
    direction: Direction = "request"
    window: Window | None = None

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
        skip = set(_RuleBase.model_fields) | set(_FrameRuleBase.model_fields) | {"kind"}
        return {"rule": self.id, **self.model_dump(exclude=skip, mode="json")}


class _FrameRuleBase(_RuleBase):
    api: list[int] | None = None
    transactional_id: str | None = None
    producer_id: int | None = None
    nth: int | None = Field(default=None, ge=1)
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    seed: int | None = None

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
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["kind"] = self.kind  # type: ignore[attr-defined]
        if self.api is not None:
            data["api"] = [api_name(k) for k in self.api]
        return data


def _request_only(rule: _RuleBase) -> None:
    if rule.direction != "request":
        raise ValueError(f"{rule.kind} rules match requests: direction must be 'request'")  # type: ignore[attr-defined]


class DelayRule(_FrameRuleBase):
    """Delay matching frames by ``ms`` (+ jitter drawn from the rule's seeded RNG).

    With ``head_of_line`` (default, like a slow TCP path) later frames of the same
    connection and direction wait behind the delayed one; without it, later requests
    overtake it (the proxy still returns responses to the client in request order).
    """

    kind: Literal["delay"] = "delay"
    ms: float = Field(ge=0)
    jitter: Literal["none", "uniform", "normal"] = "none"
    jitter_ms: float = Field(default=0.0, ge=0)
    head_of_line: bool = True

    def draw_ms(self, rng: random.Random) -> float:
        if self.jitter == "uniform":
            value = self.ms + rng.uniform(-self.jitter_ms, self.jitter_ms)
        elif self.jitter == "normal":
            value = rng.gauss(self.ms, self.jitter_ms)
        else:
            value = self.ms
        return max(0.0, value)


class DropRequestRule(_FrameRuleBase):
    """The upstream never sees the request; the client gets no response and times out."""

    kind: Literal["drop_request"] = "drop_request"

    @model_validator(mode="after")
    def _dir(self) -> DropRequestRule:
        _request_only(self)
        return self


class DropResponseRule(_FrameRuleBase):
    """The upstream processes the request; its response is swallowed."""

    kind: Literal["drop_response"] = "drop_response"

    @model_validator(mode="after")
    def _dir(self) -> DropResponseRule:
        _request_only(self)
        return self


class ReorderRule(_FrameRuleBase):
    """Hold a matching request until a later matching request (on any connection of
    the rule's links) has been forwarded, or for at most ``max_hold_ms``."""

    kind: Literal["reorder"] = "reorder"
    max_hold_ms: float = Field(default=1000.0, gt=0)

    @model_validator(mode="after")
    def _dir(self) -> ReorderRule:
        _request_only(self)
        return self


class DuplicateRule(_FrameRuleBase):
    """Send the request ``1 + copies`` times upstream; the client sees one response."""

    kind: Literal["duplicate"] = "duplicate"
    copies: int = Field(default=1, ge=1, le=16)

    @model_validator(mode="after")
    def _dir(self) -> DuplicateRule:
        _request_only(self)
        return self


class _LinkRuleBase(_RuleBase):
    direction: Direction = "both"

    def to_yaml_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["kind"] = self.kind  # type: ignore[attr-defined]
        return data


class BlackholeRule(_LinkRuleBase):
    """The link accepts bytes and forwards nothing (in ``direction``), frame-aligned."""

    kind: Literal["blackhole"] = "blackhole"


class ResetRule(_LinkRuleBase):
    """Close the link's connections (TCP RST) and refuse new ones while active."""

    kind: Literal["reset"] = "reset"


class ThrottleRule(_LinkRuleBase):
    """Limit the link's bandwidth (shared by its connections), per direction."""

    kind: Literal["throttle"] = "throttle"
    bytes_per_second: int = Field(gt=0)


FrameRule = DelayRule | DropRequestRule | DropResponseRule | ReorderRule | DuplicateRule
LinkRule = BlackholeRule | ResetRule | ThrottleRule
Rule = Annotated[FrameRule | LinkRule, Field(discriminator="kind")]

RULE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Rule)
RULE_LIST_ADAPTER: TypeAdapter[Any] = TypeAdapter(list[Rule])

FRAME_KINDS = frozenset({"delay", "drop_request", "drop_response", "reorder", "duplicate"})
LINK_KINDS = frozenset({"blackhole", "reset", "throttle"})


def parse_rule(data: Any) -> FrameRule | LinkRule:
    """Validate one rule given as a dict (from YAML/JSON) or a model instance."""
    if isinstance(data, _RuleBase):
        return data  # type: ignore[return-value]
    return RULE_ADAPTER.validate_python(data)


def parse_rules(data: Iterable[Any]) -> list[FrameRule | LinkRule]:
    return [parse_rule(x) for x in data]


def dump_rule(rule: FrameRule | LinkRule) -> dict[str, Any]:
    """A plain dict that :func:`parse_rule` turns back into an equal rule."""
    return rule.to_yaml_dict()


# --------------------------------------------------------------------------- runtime


class TokenBucket:
    """Bandwidth limit: each ``take(n)`` returns how long to wait before sending n bytes."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(rate / 20.0, 1.0))
        self._next = time.monotonic()

    def take(self, n: int) -> float:
        now = time.monotonic()
        start = max(self._next, now - self.burst / self.rate)
        self._next = start + n / self.rate
        return max(0.0, self._next - now - self.burst / self.rate)


@dataclass(eq=False)
class RuleState:
    """Runtime state of one installed rule (shared by every link it covers)."""

    rule: Any
    origin: float
    rng: random.Random
    lo: float = field(init=False)
    hi: float = field(init=False)
    matches: int = 0
    applied: int = 0
    removed: asyncio.Event = field(default_factory=asyncio.Event)
    held: list[Any] = field(default_factory=list)  # reorder: frames waiting for release
    buckets: dict[tuple[str, str], TokenBucket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        window = self.rule.window
        self.lo, self.hi = window.bounds(self.origin) if window else (-float("inf"), float("inf"))

    @property
    def kind(self) -> str:
        return self.rule.kind

    def active(self, now: float) -> bool:
        return self.lo <= now < self.hi

    def expired(self, now: float) -> bool:
        return now >= self.hi

    def covers(self, direction: str) -> bool:
        d = self.rule.direction
        return d == "both" or d == direction

    def decide(self, api_key: int, targets: Callable[[], Targets], now: float) -> bool:
        """Count a frame that passes the filters; return whether the rule applies to it."""
        if not self.active(now) or not self.rule.filters_match(api_key, targets):
            return False
        self.matches += 1
        nth = self.rule.nth
        if nth is not None and self.matches != nth:
            return False
        p = self.rule.probability
        if p < 1.0 and self.rng.random() >= p:
            return False
        self.applied += 1
        return True

    def bucket(self, link: str, direction: str) -> TokenBucket:
        key = (link, direction)
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = TokenBucket(self.rule.bytes_per_second)
        return b


def rule_rng(rule: Any, fleet_seed: int | str | None) -> random.Random:
    """The rule's own RNG: its ``seed`` if given, else derived from the fleet seed and id."""
    seed = getattr(rule, "seed", None)
    if seed is not None:
        return random.Random(seed)
    return random.Random(f"{fleet_seed}:{rule.id}")


@dataclass(frozen=True, slots=True)
class LinkPolicy:
    """What one link must do now; recomputed when rules change or windows open/close."""

    request_rules: tuple[RuleState, ...] = ()
    response_rules: tuple[RuleState, ...] = ()
    request_targets: bool = False  # some request rule matches by txn id / producer id
    response_targets: bool = False
    blackhole_request: bool = False
    blackhole_response: bool = False
    reset: bool = False
    throttle_request: tuple[TokenBucket, ...] = ()
    throttle_response: tuple[TokenBucket, ...] = ()

    @property
    def inspect_requests(self) -> bool:
        # Response rules match on the request's api/targets: requests are captured too.
        return bool(self.request_rules or self.response_rules)

    @property
    def inspect_responses(self) -> bool:
        return bool(self.request_rules or self.response_rules)


NO_FAULTS = LinkPolicy()


def compute_policy(states: Iterable[RuleState], link: str, now: float) -> LinkPolicy:
    req: list[RuleState] = []
    resp: list[RuleState] = []
    bh_req = bh_resp = reset = False
    th_req: list[TokenBucket] = []
    th_resp: list[TokenBucket] = []
    for st in states:
        rule = st.rule
        if st.expired(now) or not rule.matches_link(link):
            continue
        kind = rule.kind
        if kind in FRAME_KINDS:
            # Frame rules switch the link to frame inspection as soon as they are
            # installed (not only once their window opens) so that the switch happens
            # at a frame boundary well before the first frame must be matched.
            if st.covers("request"):
                req.append(st)
            if kind == "delay" and st.covers("response"):
                resp.append(st)
            continue
        if not st.active(now):
            continue
        if kind == "blackhole":
            bh_req |= st.covers("request")
            bh_resp |= st.covers("response")
        elif kind == "reset":
            reset = True
        elif kind == "throttle":
            if st.covers("request"):
                th_req.append(st.bucket(link, "request"))
            if st.covers("response"):
                th_resp.append(st.bucket(link, "response"))
    if not (req or resp or bh_req or bh_resp or reset or th_req or th_resp):
        return NO_FAULTS
    return LinkPolicy(
        request_rules=tuple(req),
        response_rules=tuple(resp),
        request_targets=any(s.rule.needs_targets() for s in req),
        response_targets=any(s.rule.needs_targets() for s in resp),
        blackhole_request=bh_req,
        blackhole_response=bh_resp,
        reset=reset,
        throttle_request=tuple(th_req),
        throttle_response=tuple(th_resp),
    )
