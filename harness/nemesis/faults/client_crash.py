"""Client crashes: one workload user started in its own process, brought to its hold
point (mid-transaction, or mid-poll) and SIGKILLed; the crash is logged here."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from .base import Family, FaultBase, FaultContext, TargetField, start_timeout

if TYPE_CHECKING:
    from ..schedule import RandomNemesis, ScheduledFault, Targets


class ClientCrashFault(FaultBase):
    """Which users a crash kind can hit, and where, is the user kinds' business
    (``context.crash_target``)."""

    family: Family = "client"
    targets: TargetField = "clients"
    asynchronous = True

    def random_target(
        self, rng: random.Random, gen: RandomNemesis, targets: Targets
    ) -> dict[str, Any]:
        return {"client": rng.choice(sorted(targets.clients))}

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        user, hold = context.crash_target(fault)  # no user to crash: the apply fails now
        context.spawn(
            lambda: self._crash(context, index, fault, user, hold), f"nemesis-{self.name}"
        )

    def _crash(
        self, context: FaultContext, index: int, fault: ScheduledFault, user: int, hold: str
    ) -> None:
        from ...workload.crash import CrashableClient

        started = time.time()
        logs = context.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        client = CrashableClient(
            context.workload,
            user,
            context.run_dir,
            context.handle.bootstrap,
            hold=hold,
            hold_after=1,
            seed=context.seed + index,
            log_path=logs / f"crash-{index}.log",
        )
        context.activate(index, fault, started, None, f"{self.name}: {client.process}")
        try:
            client.start(start_timeout(context))
            detail = client.wait_hold(context.hold_timeout_s)
            client.kill()
            params: dict[str, Any] = {"hold": hold, "at": detail, "action": index}
            params.update(self._after_kill(context, index, fault, user, client.process, detail))
            context.handle.fault_log().write(
                self.name,
                started,
                time.time(),
                link=None,
                target={"client": client.process},
                params=params,
            )
            context.report_outcome(index, started, None)
        except Exception as exc:
            context.report_outcome(index, started, RuntimeError(f"{client.process}: {exc}"))
            if client.alive:
                client.kill()
        finally:
            context.deactivate(index)

    def _after_kill(
        self,
        context: FaultContext,
        index: int,
        fault: ScheduledFault,
        user: int,
        process: str,
        detail: str,
    ) -> dict[str, Any]:
        """What happens once the client is dead (nothing here: its successor is the
        workload's business); returns what the fault log adds about it."""
        return {}
