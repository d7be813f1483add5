"""Carries out a nemesis schedule against a running cluster.

A thread walks the schedule in time order (relative to the workload's start) and has
each fault's kind (:data:`.faults.FAULTS`) apply it at ``at`` and, for faults that last,
heal it ``duration`` later:

* proxy faults become fault-proxy rules; the proxy writes each application to the
  fault log itself;
* node faults go through the launcher's handle (kill then restart, pause then
  resume, restart), which logs them;
* client faults start one workload user in its own process, let it reach its hold
  point (mid-transaction, or mid-poll), SIGKILL it, and log the crash.

A fault applied late (a slow node operation ahead of it held the thread) still lasts its
``duration`` from when it was applied, cut at the end of the run's fault window; a node
fault the schedule starts after another node fault ends waits for that one's heal, so node
faults the schedule keeps apart stay apart.  Every step of every action (applied, healed, or
why not) is written to the nemesis log (:mod:`.outcome_log`) for the verdict.

:meth:`heal` undoes everything still active, retrying heals that failed (removes rules,
resumes and restarts nodes) so the final phase runs on a healed cluster. ``active()``
lists the faults in effect, for the progress display.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...rundir.outcome_log import OutcomeLog
from ..launch.base import ClusterHandle
from ..workload.config import WorkloadConfig
from ..workload.kinds.registry import crash_targets
from .faults import FAULTS
from .schedule import ScheduledFault

log = logging.getLogger(__name__)

#: event order at one time: heals before applications, so a fault ending as another starts
#: never overlaps it
_UNDO, _DO = 0, 1


@dataclass
class ActiveFault:
    fault: ScheduledFault
    started: float
    undo: Any = None  # what heal() must do: a rule id, or a node id
    description: str = ""
    heal_failed: bool = False  # its heal failed: still in effect, retried by heal()


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
        window_end: float | None = None,
    ) -> None:
        """``window_end``: seconds after the workload's start by which every fault must be
        healed (the workload's duration); a late fault's heal is cut there."""
        self.schedule = schedule
        self.handle = handle
        self.workload = workload
        self.run_dir = run_dir
        self.seed = seed
        self.window_end = window_end
        self.stats = NemesisStats()
        self.outcomes = OutcomeLog(run_dir)
        self._active: dict[int, ActiveFault] = {}
        self._heal_due: dict[int, float] = {}  # action -> when its heal is due (s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = 0.0
        self._workers: list[threading.Thread] = []
        self._healed = False

    # ---- life cycle ----------------------------------------------------------------
    def start(self, origin: float | None = None) -> NemesisExecutor:
        self._origin = time.monotonic() if origin is None else origin
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        return self

    def active(self) -> list[ActiveFault]:
        with self._lock:
            return list(self._active.values())

    def _now(self) -> float:
        """Seconds since the workload started."""
        return time.monotonic() - self._origin

    def _run(self) -> None:
        events = [(fault.at, _DO, i) for i, fault in enumerate(self.schedule)]
        heapq.heapify(events)
        while events:
            at, action, i = heapq.heappop(events)
            if self._stop.wait(max(0.0, self._origin + at - time.monotonic())):
                return
            fault = self.schedule[i]
            try:
                if action == _UNDO:
                    self._undo(i, "heal", at)
                    continue
                after = self._waits_for(fault)
                if after is not None and after > at:
                    heapq.heappush(events, (after, _DO, i))
                    continue
                applied_at = self._now()
                if self._apply(i, fault) and FAULTS[fault.kind].heals:
                    due = self._heal_time(fault, applied_at)
                    with self._lock:
                        self._heal_due[i] = due
                    heapq.heappush(events, (due, _UNDO, i))
            except Exception as exc:  # a failed fault must not end the run
                message = f"{fault.kind} at {at:.1f}s: {exc}"
                log.warning("nemesis: %s", message)
                self.stats.errors.append(message)

    def _heal_time(self, fault: ScheduledFault, applied_at: float) -> float:
        """Its full duration from when it was applied (never before its scheduled end), cut
        at the fault window's end."""
        due = max(fault.end, applied_at + fault.duration)
        return due if self.window_end is None else min(due, max(fault.end, self.window_end))

    def _waits_for(self, fault: ScheduledFault) -> float | None:
        """When a node fault may start: after the heal of every node fault still in effect
        that the schedule ends before it starts (None: now)."""
        if FAULTS[fault.kind].family != "process":
            return None
        with self._lock:
            due = [
                self._heal_due[k]
                for k, a in self._active.items()
                if k in self._heal_due
                and FAULTS[a.fault.kind].family == "process"
                and a.fault.end <= fault.at
            ]
        return max(due, default=None)

    # ---- applying ----------------------------------------------------------------
    def _apply(self, index: int, fault: ScheduledFault) -> bool:
        """Apply it and log the step (a fault done in a worker logs its own); False if it
        failed."""
        kind = FAULTS[fault.kind]
        started = time.time()
        try:
            kind.apply(self, index, fault)
        except Exception as exc:
            self._outcome(index, "apply", fault.at, started, exc)
            return False
        if not kind.asynchronous:
            self._outcome(index, "apply", fault.at, started)
        return True

    def _undo(self, index: int, step: str, due: float) -> None:
        """Heal action ``index`` if it is in effect; if that fails it stays in effect (marked)
        for :meth:`heal` to retry."""
        with self._lock:
            active = self._active.get(index)
            self._heal_due.pop(index, None)
        if active is None:
            return
        started = time.time()
        try:
            FAULTS[active.fault.kind].heal(self, active.undo)
        except Exception as exc:
            active.heal_failed = True
            self._outcome(index, step, due, started, exc)
            return
        with self._lock:
            self._active.pop(index, None)
        self._outcome(index, step, due, started)

    def _outcome(
        self, index: int, step: str, due: float, started: float, exc: Exception | None = None
    ) -> None:
        """Count a step and write it to the nemesis log (an error also to ``stats.errors``)."""
        fault = self.schedule[index]
        error = None if exc is None else (str(exc) or type(exc).__name__)
        if error is None:
            with self._lock:  # crash workers report from their own threads
                if step == "apply":
                    self.stats.applied += 1
                else:
                    self.stats.healed += 1
        else:
            what = "applying" if step == "apply" else "healing"
            message = f"{what} {fault.kind} (action {index}, at {fault.at:.1f}s): {error}"
            log.warning("nemesis: %s", message)
            self.stats.errors.append(message)
        try:
            self.outcomes.write(index, fault.kind, step, due, started, time.time(), error)
        except OSError as e:
            log.error("nemesis: the nemesis log cannot be written: %s", e)

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

    def report_outcome(self, index: int, started: float, error: Exception | None) -> None:
        self._outcome(index, "apply", self.schedule[index].at, started, error)

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
        """Stop the schedule and undo every fault still in effect, once: a fault whose heal
        failed is retried (``heal_retry`` in the nemesis log)."""
        self.stop()
        if self._healed:
            return
        for worker in self._workers:
            worker.join(timeout=150)
        with self._lock:
            pending = [(i, a) for i, a in self._active.items() if FAULTS[a.fault.kind].heals]
        now = self._now()
        for index, active in pending:
            self._undo(index, "heal_retry" if active.heal_failed else "heal", now)
        if self.handle.fleet is not None:
            self.handle.fleet.heal_all()
        self._healed = True  # not before: a heal cut short (Ctrl-C) runs again at cleanup
