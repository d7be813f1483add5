"""Installed rules at run time: each rule's state, and the policy a link follows now."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..apis import Targets


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


class HeldFrame(Protocol):
    """A frame a rule keeps back until something releases it."""

    def release(self, why: str) -> None: ...


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
    held: list[HeldFrame] = field(default_factory=list)  # released by a later matching request
    buckets: dict[tuple[str, str], TokenBucket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        window = self.rule.window
        self.lo, self.hi = window.bounds(self.origin) if window else (-float("inf"), float("inf"))

    @property
    def kind(self) -> str:
        return str(self.rule.kind)

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

    def release_held(self, why: str) -> None:
        for held in list(self.held):
            held.release(why)


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


@dataclass
class PolicyParts:
    """A link policy being built: each installed rule adds its part (``rule.shape``)."""

    request_rules: list[RuleState] = field(default_factory=list)
    response_rules: list[RuleState] = field(default_factory=list)
    blackhole_request: bool = False
    blackhole_response: bool = False
    reset: bool = False
    throttle_request: list[TokenBucket] = field(default_factory=list)
    throttle_response: list[TokenBucket] = field(default_factory=list)

    def empty(self) -> bool:
        return not (
            self.request_rules
            or self.response_rules
            or self.blackhole_request
            or self.blackhole_response
            or self.reset
            or self.throttle_request
            or self.throttle_response
        )


def compute_policy(states: Iterable[RuleState], link: str, now: float) -> LinkPolicy:
    parts = PolicyParts()
    for st in states:
        if st.expired(now) or not st.rule.matches_link(link):
            continue
        st.rule.shape(st, link, now, parts)
    if parts.empty():
        return NO_FAULTS
    return LinkPolicy(
        request_rules=tuple(parts.request_rules),
        response_rules=tuple(parts.response_rules),
        request_targets=any(s.rule.needs_targets() for s in parts.request_rules),
        response_targets=any(s.rule.needs_targets() for s in parts.response_rules),
        blackhole_request=parts.blackhole_request,
        blackhole_response=parts.blackhole_response,
        reset=parts.reset,
        throttle_request=tuple(parts.throttle_request),
        throttle_response=tuple(parts.throttle_response),
    )


async def sleep_unless_removed(seconds: float, states: list[RuleState]) -> None:
    """Sleep, but wake up early if one of the rules is removed (healed)."""
    if seconds <= 0:
        return
    if any(st.removed.is_set() for st in states):
        return
    waits = [asyncio.ensure_future(st.removed.wait()) for st in states]
    try:
        await asyncio.wait(waits, timeout=seconds)
    finally:
        for w in waits:
            w.cancel()
