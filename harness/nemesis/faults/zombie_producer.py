"""``zombie_producer``: a transactional producer paused in the middle of a transaction while
a new instance with the same transactional id initialises, commits a transaction and opens
another; then the old instance wakes, sends the rest of its transaction and commits it.

The new instance's InitProducerId fenced the old one (its open transaction is aborted with
a bumped epoch), so a correct cluster refuses the zombie's late records on every partition
that has seen the new epoch and its commit (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH);
nothing it wrote may become visible. The zombie's history records what the cluster said
(the ``fenced_commit`` checker flags a commit acknowledged after a newer instance's init).

The user must have a transactional id shared by restarts (a template on ``{index}``, not
``{process}``): the new instance is the old one's successor (same index, new process).
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

from .base import start_timeout
from .client_crash import ClientCrashFault

if TYPE_CHECKING:
    from ..schedule import ScheduledFault
    from .base import FaultContext


STOP_TIMEOUT_S = 10.0


class ZombieProducerFault(ClientCrashFault):
    name = "zombie_producer"

    def _crash(
        self, context: FaultContext, index: int, fault: ScheduledFault, user: int, hold: str
    ) -> None:
        from ...workload.crash import CrashableClient

        started = time.time()
        spec = context.workload.users[user]
        template = str(getattr(spec, "transactional_id", ""))
        logs = context.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        if "{process}" in template:
            error = RuntimeError(
                f"zombie_producer needs a user whose transactional_id does not depend on "
                f"{{process}} (e.g. 'writer-{{index}}'); {getattr(spec, 'name', spec.kind)} "
                f"has {template!r}"
            )
            context.report_outcome(index, started, error)
            return
        old = CrashableClient(
            context.workload,
            user,
            context.run_dir,
            context.handle.bootstrap,
            hold=hold,
            hold_after=1,
            seed=context.seed + index,
            log_path=logs / f"zombie-{index}.log",
        )
        context.activate(index, fault, started, None, f"{self.name}: {old.process}")
        new: CrashableClient | None = None
        try:
            old.start(start_timeout(context))
            held = old.wait_hold(context.hold_timeout_s)
            proc = old.child.proc
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)  # a zombie: no traffic at all while it sleeps
            new = old.successor(hold="before-commit", hold_after=1, seed=context.seed + index + 1)
            new.start(start_timeout(context))
            new_held = new.wait_hold(context.hold_timeout_s)
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGUSR1)
            resumed = old.wait_line("RESUMED", context.hold_timeout_s)
            params: dict[str, Any] = {
                "action": index,
                "zombie": old.process,
                "held": held,
                "successor": new.process,
                "successor_held": new_held,
                "resumed": resumed,
            }
            for client in (new, old):
                client.stop(STOP_TIMEOUT_S)
            context.handle.fault_log().write(
                self.name,
                started,
                time.time(),
                link=None,
                target={"client": old.process},
                params=params,
            )
            context.report_outcome(index, started, None)
        except Exception as exc:
            context.report_outcome(index, started, RuntimeError(f"{old.process}: {exc}"))
        finally:
            for left in [c for c in (old, new) if c is not None and c.alive]:
                if left.child.proc is not None:
                    left.child.proc.send_signal(signal.SIGCONT)  # a stopped process ignores TERM
                left.stop(STOP_TIMEOUT_S)
            context.deactivate(index)
