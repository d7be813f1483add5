"""The fault protocol: what the schedule, scenario validation and the executor need to
know about one fault kind, and the executor services a fault acts through."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from ...launch.base import ClusterHandle
    from ...workload.config import WorkloadConfig
    from ..schedule import RandomNemesis, ScheduledFault, Targets, TimedAction

Family = Literal["proxy_rule", "process", "client"]
"""A proxy rule on links, something done to a node's process, or a client crash."""

TargetField = Literal["links", "nodes", "clients"]


class ScheduleError(ValueError):
    """The scenario's faults cannot be scheduled against this cluster."""


#: How long a client process a fault starts may take to say READY (its imports alone took
#: 20-50 s on a loaded 2-core machine); the hold timeout bounds what it does after that
START_TIMEOUT_S = 60.0


def start_timeout(context: FaultContext) -> float:
    """The READY wait of a client process a fault starts: the hold timeout, at least
    :data:`START_TIMEOUT_S`."""
    return max(context.hold_timeout_s, START_TIMEOUT_S)


class FaultContext(Protocol):
    """What a fault acts through (the nemesis executor)."""

    handle: ClusterHandle
    workload: WorkloadConfig
    run_dir: Path
    seed: int
    hold_timeout_s: float

    def activate(
        self, index: int, fault: ScheduledFault, started: float, undo: Any, description: str
    ) -> None:
        """Record action ``index`` as in effect; ``undo`` is what :meth:`Fault.heal` gets."""

    def deactivate(self, index: int) -> None: ...

    def spawn(self, target: Callable[[], None], name: str) -> None:
        """Run ``target`` in a worker thread that healing waits for."""

    def report_outcome(self, index: int, started: float, error: Exception | None) -> None:
        """How an asynchronous fault's application ended (``started``: epoch seconds)."""

    def crash_target(self, fault: ScheduledFault) -> tuple[int, str]:
        """The workload user a client crash hits, and the point where it is killed."""


class Fault(Protocol):
    """One fault kind."""

    @property
    def name(self) -> str:
        """The ``kind`` a scenario writes."""

    @property
    def family(self) -> Family: ...

    @property
    def targets(self) -> TargetField:
        """Which of the run's targets (:class:`..schedule.Targets`) it hits."""

    @property
    def parameters(self) -> type[BaseModel] | None:
        """The model an action's ``rule`` is validated against (proxy-rule faults)."""

    @property
    def heals(self) -> bool:
        """It stays in effect until healed at ``at + duration``."""

    @property
    def needs_duration(self) -> bool:
        """An explicit action must give a positive ``duration``."""

    @property
    def instant(self) -> bool:
        """Random faults of this kind last 0 s."""

    @property
    def asynchronous(self) -> bool:
        """``apply`` only starts it (in a worker, ``spawn``), which then reports how it
        ended (``report_outcome``)."""

    def check_action(self, action: TimedAction) -> None:
        """Raise ValueError if the explicit action is not a valid one of this kind."""

    def check_targets(self, action: TimedAction, targets: Targets) -> None:
        """Raise :class:`ScheduleError` if the action cannot hit this cluster."""

    def usable(self, targets: Targets) -> bool:
        """Whether a random fault of this kind can hit anything in this cluster."""

    def random_target(
        self, rng: random.Random, gen: RandomNemesis, targets: Targets
    ) -> dict[str, Any]:
        """The ``node`` / ``rule`` / ``client`` fields of a random fault of this kind."""

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None: ...

    def heal(self, context: FaultContext, undo: Any) -> None: ...


class FaultBase:
    """Defaults shared by the fault kinds (a kind overrides what differs)."""

    name: str
    family: Family
    targets: TargetField
    parameters: type[BaseModel] | None = None
    heals: bool = False
    needs_duration: bool = False
    instant: bool = False
    asynchronous: bool = False

    def check_action(self, action: TimedAction) -> None:
        if action.rule:
            raise ValueError(f"`rule` is only for proxy faults, not {self.name}")

    def check_targets(self, action: TimedAction, targets: Targets) -> None:
        return None

    def usable(self, targets: Targets) -> bool:
        return bool(getattr(targets, self.targets))

    def heal(self, context: FaultContext, undo: Any) -> None:
        return None
