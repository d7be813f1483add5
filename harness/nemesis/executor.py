"""Carries out a nemesis schedule against a running cluster.

A thread walks the schedule in time order (relative to the workload's start):

* proxy faults become fault-proxy rules added at ``at`` and removed at ``at +
  duration``; the proxy writes each application to the fault log itself;
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..faults.proxy.rules import parse_rule
from ..launch.base import ClusterHandle
from ..workload.config import WorkloadConfig
from .schedule import CLIENT_KINDS, NODE_KINDS, PROXY_KINDS, ScheduledFault

log = logging.getLogger(__name__)

_CRASH_TARGETS = {
    "crash_producer": (
        ("transactional_producer", "before-commit"),
        ("idempotent_producer", "before-ack"),
        ("tv2_producer", "before-commit"),
    ),
    "crash_consumer": (
        ("read_committed_consumer", "in-poll"),
        ("eos_copier", "in-poll"),
        ("tv2_copier", "in-poll"),
    ),
}


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
            if fault.kind in PROXY_KINDS or fault.kind in ("kill", "pause"):
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
        kind = fault.kind
        started = time.time()
        if kind in PROXY_KINDS:
            if self.handle.fleet is None:
                raise RuntimeError("this cluster runs without fault proxies")
            # the rule id names the action, so the report groups its records under it
            rule_fields = {"id": f"action-{index}", **fault.rule, "kind": kind}
            rule = self.handle.fleet.add_rule(parse_rule(rule_fields))
            self._activate(index, fault, started, rule.id, f"{kind} on {fault.rule.get('link')}")
        elif kind in NODE_KINDS:
            assert fault.node is not None
            if kind == "kill":
                self.handle.kill(fault.node)
                self._activate(index, fault, started, fault.node, f"node {fault.node} killed")
            elif kind == "pause":
                self.handle.pause(fault.node)
                self._activate(index, fault, started, fault.node, f"node {fault.node} paused")
            else:
                self.handle.restart(fault.node)
        elif kind in CLIENT_KINDS:
            worker = threading.Thread(
                target=self._crash_client,
                args=(index, fault),
                name=f"nemesis-{kind}",
                daemon=True,
            )
            self._workers.append(worker)
            worker.start()
        self.stats.applied += 1

    def _activate(
        self, index: int, fault: ScheduledFault, started: float, undo: Any, text: str
    ) -> None:
        with self._lock:
            self._active[index] = ActiveFault(fault, started, undo, text)

    def _undo(self, index: int) -> None:
        with self._lock:
            active = self._active.pop(index, None)
        if active is None:
            return
        kind = active.fault.kind
        if kind in PROXY_KINDS:
            if self.handle.fleet is not None:
                self.handle.fleet.remove_rule(active.undo)
        elif kind == "kill":
            self.handle.restart(active.undo)
        elif kind == "pause":
            self.handle.resume(active.undo)
        self.stats.healed += 1

    def _crash_client(self, index: int, fault: ScheduledFault) -> None:
        from ..workload.crash import CrashableClient

        user, hold = self._crash_target(fault)
        started = time.time()
        client = CrashableClient(
            self.workload,
            user,
            self.run_dir,
            self.handle.bootstrap,
            hold=hold,
            hold_after=1,
            seed=self.seed + index,
            log_path=self.run_dir / "logs" / f"crash-{index}.log",
        )
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self._activate(index, fault, started, None, f"{fault.kind}: {client.process}")
        try:
            client.start(self.hold_timeout_s)
            detail = client.wait_hold(self.hold_timeout_s)
            client.kill()
            self.handle.fault_log().write(
                fault.kind,
                started,
                time.time(),
                link=None,
                target={"client": client.process},
                params={"hold": hold, "at": detail, "action": index},
            )
        except Exception as exc:
            message = f"{fault.kind} ({client.process}): {exc}"
            log.warning("nemesis: %s", message)
            self.stats.errors.append(message)
            if client.alive:
                client.kill()
        finally:
            with self._lock:
                self._active.pop(index, None)

    def _crash_target(self, fault: ScheduledFault) -> tuple[int, str]:
        """The workload user to crash: the one ``client`` names (a kind or a user name)
        if it fits the fault, else the first user that does."""
        fitting = [
            (i, hold)
            for kind, hold in _CRASH_TARGETS[fault.kind]
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
