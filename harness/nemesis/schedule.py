"""The nemesis schedule: which fault happens when, fully determined by the scenario
and ``--seed``.

A scenario gives explicit timed actions and/or a random generator (a weighted mix of
fault kinds, an intensity, and calm periods). :func:`build_schedule` turns both into
one sorted list of :class:`ScheduledFault`; the same scenario, targets and seed give
the same list, byte for byte. Every fault ends (is healed) before the run's workload
phase ends, so the final phase always runs on a healed cluster.

Fault kinds:

* proxy faults (applied as fault-proxy rules for ``duration`` seconds): ``delay``,
  ``drop_request``, ``drop_response``, ``reorder``, ``duplicate``, ``blackhole``,
  ``reset``, ``throttle``. ``rule`` holds the rule's fields (see
  ``harness/faults/proxy/rules.py``) except ``kind`` and ``window``.
* node faults: ``kill`` (SIGKILL, restarted after ``duration``), ``pause`` (SIGSTOP /
  docker pause for ``duration``), ``restart`` (clean restart).
* client faults: ``crash_producer`` (a transactional producer killed mid-transaction,
  without aborting), ``crash_consumer`` (a consumer killed mid-poll).
"""

from __future__ import annotations

import random
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

FaultKind = Literal[
    # proxy faults
    "delay",
    "drop_request",
    "drop_response",
    "reorder",
    "duplicate",
    "blackhole",
    "reset",
    "throttle",
    # node faults
    "kill",
    "pause",
    "restart",
    # client faults
    "crash_producer",
    "crash_consumer",
]
ALL_KINDS: tuple[str, ...] = get_args(FaultKind)
PROXY_KINDS = ALL_KINDS[:8]
NODE_KINDS = ALL_KINDS[8:11]
CLIENT_KINDS = ALL_KINDS[11:]


class TimedAction(BaseModel):
    """One explicit action of a scenario."""

    model_config = ConfigDict(extra="forbid")

    at: float = Field(ge=0, description="seconds after the workload starts")
    kind: FaultKind
    duration: float = Field(default=0.0, ge=0, description="how long the fault lasts")
    node: int | None = Field(default=None, description="node id, for node faults")
    rule: dict[str, Any] = Field(
        default_factory=dict, description="proxy rule fields, for proxy faults"
    )
    client: str | None = Field(default=None, description="user kind or process, client faults")

    @model_validator(mode="after")
    def _targets(self) -> TimedAction:
        if self.kind in NODE_KINDS and self.node is None:
            raise ValueError(f"a {self.kind} action needs `node`")
        if self.kind not in PROXY_KINDS and self.rule:
            raise ValueError(f"`rule` is only for proxy faults, not {self.kind}")
        if self.kind in ("kill", "pause") and self.duration <= 0:
            raise ValueError(f"a {self.kind} action needs a positive `duration`")
        if "kind" in self.rule or "window" in self.rule:
            raise ValueError("`rule` must not set `kind` or `window`: the schedule does")
        return self


class RandomNemesis(BaseModel):
    """A seeded random fault generator."""

    model_config = ConfigDict(extra="forbid")

    mix: dict[FaultKind, float] = Field(
        description="fault kind -> relative weight (weights need not sum to 1)"
    )
    intensity: float = Field(gt=0, description="mean faults per minute outside calm periods")
    duration: tuple[float, float] = Field(
        default=(1.0, 5.0), description="each fault lasts uniformly between these seconds"
    )
    start_after: float = Field(default=0.0, ge=0, description="no random faults before this")
    calm_every: float | None = Field(
        default=None, gt=0, description="a calm period starts every this many seconds"
    )
    calm_for: float = Field(default=0.0, ge=0, description="length of each calm period")
    delay_ms: tuple[int, int] = Field(default=(20, 500), description="range for random delays")
    apis: list[str] = Field(
        default_factory=list, description="restrict frame faults to these APIs (names)"
    )

    @model_validator(mode="after")
    def _check(self) -> RandomNemesis:
        if not self.mix or any(w < 0 for w in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ValueError("`mix` needs at least one fault kind with a positive weight")
        lo, hi = self.duration
        if lo < 0 or hi < lo:
            raise ValueError(f"`duration` must be (min, max) with 0 <= min <= max, got {lo, hi}")
        if self.calm_every is not None and self.calm_for >= self.calm_every:
            raise ValueError("`calm_for` must be shorter than `calm_every`")
        return self


class NemesisConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    actions: list[TimedAction] = Field(default_factory=list)
    random: RandomNemesis | None = None


class Targets(BaseModel):
    """What faults can hit in this run (known once the cluster is up)."""

    nodes: list[int] = Field(default_factory=list)
    links: list[str] = Field(default_factory=list)
    clients: list[str] = Field(default_factory=list)
    node_faults: bool = True  # external clusters: no node faults


class ScheduledFault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float
    kind: FaultKind
    duration: float
    node: int | None = None
    rule: dict[str, Any] = Field(default_factory=dict)
    client: str | None = None
    origin: Literal["action", "random"] = "action"

    @property
    def end(self) -> float:
        return self.at + self.duration


class ScheduleError(ValueError):
    pass


def _random_rule(kind: str, rng: random.Random, gen: RandomNemesis, link: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"link": link}
    if kind in ("delay", "drop_request", "drop_response", "reorder", "duplicate") and gen.apis:
        rule["api"] = list(gen.apis)
    if kind == "delay":
        lo, hi = gen.delay_ms
        rule["ms"] = rng.randint(lo, hi)
        rule["jitter"] = "uniform"
        rule["jitter_ms"] = max(1, rule["ms"] // 4)
    elif kind in ("drop_request", "drop_response", "duplicate"):
        rule["nth"] = 1  # one frame, then the rule is spent
    elif kind == "reorder":
        rule["max_hold_ms"] = rng.randint(50, 1000)
    elif kind == "throttle":
        rule["bytes_per_second"] = rng.choice([10_000, 100_000, 1_000_000])
    return rule


def _in_calm(t: float, gen: RandomNemesis) -> bool:
    if gen.calm_every is None or gen.calm_for <= 0:
        return False
    return (t % gen.calm_every) >= gen.calm_every - gen.calm_for


def build_schedule(
    config: NemesisConfig, *, seed: int, duration: float, targets: Targets
) -> list[ScheduledFault]:
    """The run's faults, sorted by start time; every one ends by ``duration``."""
    out: list[ScheduledFault] = []
    for action in config.actions:
        if action.kind in NODE_KINDS:
            if not targets.node_faults:
                raise ScheduleError(f"this cluster does not support node faults ({action.kind})")
            if action.node not in targets.nodes:
                raise ScheduleError(f"action at {action.at}s: no node {action.node}")
        if action.at + action.duration > duration:
            raise ScheduleError(
                f"action {action.kind} at {action.at}s lasting {action.duration}s ends after "
                f"the workload ({duration}s): faults must heal before the final phase"
            )
        out.append(ScheduledFault(origin="action", **action.model_dump()))

    gen = config.random
    if gen is not None:
        rng = random.Random(f"txnchaos-nemesis:{seed}")
        kinds = [k for k in sorted(gen.mix) if gen.mix[k] > 0 and _usable(k, targets)]
        if not kinds:
            raise ScheduleError("none of the random nemesis' fault kinds can hit this cluster")
        weights = [gen.mix[k] for k in kinds]
        mean_gap = 60.0 / gen.intensity
        t = gen.start_after
        while True:
            t += rng.expovariate(1.0 / mean_gap)
            if t >= duration:
                break
            kind = rng.choices(kinds, weights)[0]
            lo, hi = gen.duration
            length = 0.0 if kind == "restart" else rng.uniform(lo, hi)
            if _in_calm(t, gen) or t + length > duration:
                continue
            fault: dict[str, Any] = {"at": round(t, 3), "kind": kind, "duration": round(length, 3)}
            if kind in NODE_KINDS:
                fault["node"] = rng.choice(sorted(targets.nodes))
            elif kind in PROXY_KINDS:
                fault["rule"] = _random_rule(kind, rng, gen, rng.choice(sorted(targets.links)))
            else:
                fault["client"] = rng.choice(sorted(targets.clients))
            out.append(ScheduledFault(origin="random", **fault))
    out.sort(key=lambda f: (f.at, f.kind, f.node or 0, f.client or ""))
    return out


def _usable(kind: str, targets: Targets) -> bool:
    if kind in NODE_KINDS:
        return targets.node_faults and bool(targets.nodes)
    if kind in PROXY_KINDS:
        return bool(targets.links)
    return bool(targets.clients)
