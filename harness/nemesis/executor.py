"""Carries out a nemesis schedule against a running cluster.

A thread walks the schedule in time order (relative to the workload's start) and has
each fault's kind (:data:`.faults.FAULTS`) apply it at ``at`` and, for faults that last,
heal it at ``at + duration``:

* proxy faults become fault-proxy rules; the proxy writes each application to the
  fault log itself;
* node faults go through the launcher's handle (kill then restart, pause then
  resume, restart), which logs them;
* client faults start one workload user in its own process, let it reach its hold
  point (mid-transaction, or mid-poll), SIGKILL it, and log the crash.

:meth:`heal` undoes everything still active (removes rules, resumes and restarts
nodes) so the final phase runs on a healed cluster. ``active()`` lists the faults in
effect, for the progress display.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..launch.base import ClusterHandle
from ..workload.config import WorkloadConfig
from ..workload.kinds.registry import crash_targets
from .faults import FAULTS
from .schedule import ScheduledFault

log = logging.getLogger(__name__)


@dataclass
class ActiveFault:
    fault: ScheduledFault
    started: float
    undo: Any = None  # what heal() must do: a rule id, or a node id
    description: str = ""


@dataclass
class NemesisStats:
    applied: int = 0
    healed: int = 0
    errors: list[str] = field(default_factory=list)


class NemesisExecutor:
    hold_timeout_s = 120.0
    """How long a client to crash may take to start, and then to reach its hold point,
    before the fault is given up (recorded as an error) and the client killed."""

    def __init__(
        self,
        schedule: list[ScheduledFault],
        handle: ClusterHandle,
        *,
        workload: WorkloadConfig,
        run_dir: Path,
        seed: int,
    ) -> None:
        self.schedule = schedule
        self.handle = handle
        self.workload = workload
        self.run_dir = run_dir
        self.seed = seed
        self.stats = NemesisStats()
        self._active: dict[int, ActiveFault] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = 0.0
        self._workers: list[threading.Thread] = []

    # ---- life cycle ----------------------------------------------------------------
    def start(self, origin: float | None = None) -> NemesisExecutor:
        self._origin = time.monotonic() if origin is None else origin
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        return self

    def active(self) -> list[ActiveFault]:
        with self._lock:
            return list(self._active.values())

    def _run(self) -> None:
        # Events: (time, order, action, index). Undo events sort before do events at the
        # same time so a fault ending as another starts never overlaps it.
        events: list[tuple[float, int, str, int]] = []
        for i, fault in enumerate(self.schedule):
            events.append((fault.at, 1, "do", i))
            if FAULTS[fault.kind].heals:
                events.append((fault.end, 0, "undo", i))
        events.sort()
        for at, _, action, i in events:
            if self._stop.wait(max(0.0, self._origin + at - time.monotonic())):
                return
            try:
                if action == "do":
                    self._apply(i, self.schedule[i])
                else:
                    self._undo(i)
            except Exception as exc:  # a failed fault must not end the run
                message = f"{self.schedule[i].kind} at {at:.1f}s: {exc}"
                log.warning("nemesis: %s", message)
                self.stats.errors.append(message)

    # ---- applying ----------------------------------------------------------------
    def _apply(self, index: int, fault: ScheduledFault) -> None:
        FAULTS[fault.kind].apply(self, index, fault)
        self.stats.applied += 1

    def _undo(self, index: int) -> None:
        with self._lock:
            active = self._active.pop(index, None)
        if active is None:
            return
        FAULTS[active.fault.kind].heal(self, active.undo)
        self.stats.healed += 1

    # ---- what faults act through (faults.base.FaultContext) ---------------------------
    def activate(
        self, index: int, fault: ScheduledFault, started: float, undo: Any, description: str
    ) -> None:
        with self._lock:
            self._active[index] = ActiveFault(fault, started, undo, description)

    def deactivate(self, index: int) -> None:
        with self._lock:
            self._active.pop(index, None)

    def spawn(self, target: Callable[[], None], name: str) -> None:
        worker = threading.Thread(target=target, name=name, daemon=True)
        self._workers.append(worker)
        worker.start()

    def report_error(self, message: str) -> None:
        self.stats.errors.append(message)

    def crash_target(self, fault: ScheduledFault) -> tuple[int, str]:
        return self._crash_target(fault)

    def _crash_target(self, fault: ScheduledFault) -> tuple[int, str]:
        """The workload user to crash: the one ``client`` names (a kind or a user name)
        if it fits the fault, else the first user that does."""
        fitting = [
            (i, hold)
            for kind, hold in crash_targets(fault.kind)
            for i, spec in enumerate(self.workload.users)
            if spec.kind == kind
        ]
        if not fitting:
            raise RuntimeError(f"no workload user can take a {fault.kind}")
        for i, hold in fitting:
            spec = self.workload.users[i]
            if fault.client in (spec.kind, getattr(spec, "name", None)):
                return i, hold
        return fitting[0]

    # ---- healing -------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def heal(self) -> None:
        """Stop the schedule and undo every fault still in effect."""
        self.stop()
        for worker in self._workers:
            worker.join(timeout=150)
        with self._lock:
            pending = list(self._active)
        for index in pending:
            try:
                self._undo(index)
            except Exception as exc:
                self.stats.errors.append(f"healing {index}: {exc}")
        if self.handle.fleet is not None:
            self.handle.fleet.heal_all()
