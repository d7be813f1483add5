"""The nemesis schedule: which fault happens when, fully determined by the scenario
and ``--seed``.

A scenario gives explicit timed actions and/or a random generator (a weighted mix of
fault kinds, an intensity, and calm periods). :func:`build_schedule` turns both into
one sorted list of :class:`ScheduledFault`; the same scenario, targets and seed give
the same list, byte for byte. Every fault ends (is healed) before the run's workload
phase ends, so the final phase always runs on a healed cluster.

Fault kinds (one module each in ``harness/nemesis/faults/``, registered in
:data:`~.faults.FAULTS`, from which everything here is derived):

* proxy faults (applied as fault-proxy rules for ``duration`` seconds): ``delay``,
  ``drop_request``, ``drop_response``, ``reorder``, ``duplicate``, ``blackhole``,
  ``reset``, ``throttle``, ``strip_partition``, ``stale_marker``. ``rule`` holds the rule's
  fields (see ``harness/faults/proxy/rules/``) except ``kind`` and ``window``.
* node faults: ``kill`` (SIGKILL, restarted after ``duration``), ``pause`` (SIGSTOP /
  docker pause for ``duration``), ``restart`` (clean restart). The random generator
  never overlaps two node faults.
* client faults: ``crash_producer`` (a transactional producer killed mid-transaction,
  without aborting), ``crash_consumer`` (a consumer killed mid-poll).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .faults import FAULTS, ScheduleError

if TYPE_CHECKING:
    FaultKind = str
else:
    FaultKind = Literal[tuple(FAULTS)]  # validated against the registry's names


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
        FAULTS[self.kind].check_action(self)
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


__all__ = [
    "FaultKind",
    "NemesisConfig",
    "RandomNemesis",
    "ScheduleError",
    "ScheduledFault",
    "Targets",
    "TimedAction",
    "build_schedule",
    "no_room",
]


def _in_calm(t: float, gen: RandomNemesis) -> bool:
    if gen.calm_every is None or gen.calm_for <= 0:
        return False
    return (t % gen.calm_every) >= gen.calm_every - gen.calm_for


#: draws :func:`_one_random_fault` makes before it gives up on calm periods
_PLACEMENT_DRAWS = 1000

NODE_SETTLE_S = 5.0
"""Seconds after a fixed node fault heals (a restart: the node back and serving) in which
no random node fault starts. The executor applies faults one after another, and a restart
waits until its node serves: a random pause of the node it needs (the controller, say) that
began just before would hold the restart, and the whole schedule behind it, until the
restart gave up minutes later."""


def _fixed_node_windows(actions: list[TimedAction]) -> list[tuple[float, float]]:
    """When the fixed node faults act, heal and settle: random node faults keep out."""
    return [
        (a.at, a.at + a.duration + NODE_SETTLE_S)
        for a in actions
        if FAULTS[a.kind].family == "process"
    ]


def _clashes(t: float, length: float, windows: list[tuple[float, float]]) -> bool:
    return any(t <= hi and t + length >= lo for lo, hi in windows)


def no_room(gen: RandomNemesis, duration: float) -> str | None:
    """Why the random generator cannot place a single fault in ``duration`` seconds of
    workload (its start and its shortest fault leave no time), or None."""
    shortest = gen.duration[0] if any(not FAULTS[k].instant for k in gen.mix) else 0.0
    if gen.start_after + shortest >= duration:
        return (
            f"nemesis.random: start_after {gen.start_after:g}s plus the shortest fault "
            f"({shortest:g}s) leave no room for a fault in {duration:g}s of workload"
        )
    return None


def _one_random_fault(
    gen: RandomNemesis,
    rng: random.Random,
    kinds: list[str],
    weights: list[float],
    duration: float,
    targets: Targets,
    node_windows: list[tuple[float, float]],
) -> ScheduledFault:
    """One random fault placed uniformly where it fits (outside calm periods, healed by
    ``duration``, a node fault clear of the fixed ones): what a random mix whose arrivals
    all missed the run schedules instead."""
    lo, hi = gen.duration
    for _ in range(_PLACEMENT_DRAWS):
        kind = rng.choices(kinds, weights)[0]
        spec = FAULTS[kind]
        length = 0.0 if spec.instant else rng.uniform(lo, hi)
        if gen.start_after + length >= duration:
            continue
        t = rng.uniform(gen.start_after, duration - length)
        if _in_calm(t, gen) or t >= duration:
            continue
        if spec.family == "process" and _clashes(t, length, node_windows):
            continue
        fault: dict[str, Any] = {"at": round(t, 3), "kind": kind, "duration": round(length, 3)}
        fault.update(spec.random_target(rng, gen, targets))
        return ScheduledFault(origin="random", **fault)
    raise ScheduleError(
        no_room(gen, duration)
        or f"nemesis.random: no room for a fault outside the calm periods in {duration:g}s"
    )


def build_schedule(
    config: NemesisConfig, *, seed: int, duration: float, targets: Targets
) -> list[ScheduledFault]:
    """The run's faults, sorted by start time; every one ends by ``duration``.  A random
    generator contributes at least one fault (its seeded arrivals, or else one placed where
    it fits): a random mix never yields an empty schedule."""
    out: list[ScheduledFault] = []
    for action in config.actions:
        FAULTS[action.kind].check_targets(action, targets)
        if action.at + action.duration > duration:
            raise ScheduleError(
                f"action {action.kind} at {action.at}s lasting {action.duration}s ends after "
                f"the workload ({duration}s): faults must heal before the final phase"
            )
        out.append(ScheduledFault(origin="action", **action.model_dump()))

    gen = config.random
    if gen is not None:
        rng = random.Random(f"txnchaos-nemesis:{seed}")
        kinds = [k for k in sorted(gen.mix) if gen.mix[k] > 0 and FAULTS[k].usable(targets)]
        if not kinds:
            raise ScheduleError("none of the random nemesis' fault kinds can hit this cluster")
        weights = [gen.mix[k] for k in kinds]
        mean_gap = 60.0 / gen.intensity
        t = gen.start_after
        # Random node faults come one at a time, and clear of the fixed ones: a node
        # restarting while another is paused (the controller, say) would wait for it, and
        # the schedule with it.
        nodes_healed_at = 0.0
        node_windows = _fixed_node_windows(config.actions)
        while True:
            t += rng.expovariate(1.0 / mean_gap)
            if t >= duration:
                break
            kind = rng.choices(kinds, weights)[0]
            spec = FAULTS[kind]
            lo, hi = gen.duration
            length = 0.0 if spec.instant else rng.uniform(lo, hi)
            on_node = spec.family == "process"
            if (
                _in_calm(t, gen)
                or t + length > duration
                or (on_node and round(t, 3) < nodes_healed_at)
                or (on_node and _clashes(t, length, node_windows))
            ):
                continue
            fault: dict[str, Any] = {"at": round(t, 3), "kind": kind, "duration": round(length, 3)}
            fault.update(spec.random_target(rng, gen, targets))
            out.append(ScheduledFault(origin="random", **fault))
            if on_node:
                nodes_healed_at = out[-1].end
        if not any(f.origin == "random" for f in out):
            # a random mix always faults: a quiet draw would pass a run that tested nothing
            out.append(_one_random_fault(gen, rng, kinds, weights, duration, targets, node_windows))
    out.sort(key=lambda f: (f.at, f.kind, f.node or 0, f.client or ""))
    return out
