"""Dual-writer crashes (KIP-939): the writer is killed at a point of its recipe, then the
recovery recipe runs in a process of its own (killed once mid-recovery by
``crash_writer_in_recovery``) until it completes the writer's prepared transaction: a 2PC
transaction never times out, so nothing else would. The writer stays down ``duration``
seconds before its recovery starts (its prepared transaction waits that long)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from .base import FaultContext, start_timeout
from .client_crash import ClientCrashFault

if TYPE_CHECKING:
    from ..schedule import ScheduledFault

_HOLD = re.compile(r"HOLD txn=(\d+) transactional_id=(\S+) state=(\S*)")


class DualWriteCrashFault(ClientCrashFault):
    #: Kill the first recovery too, after its keep-prepared init.
    crash_recovery: bool = False

    def _after_kill(
        self,
        context: FaultContext,
        index: int,
        fault: ScheduledFault,
        user: int,
        process: str,
        detail: str,
    ) -> dict[str, Any]:
        """Wait ``duration`` (the writer is down), then run the recovery recipe to its end
        (killing a first recovery mid-way when ``crash_recovery``)."""
        from ...workload.dual_write.recovery_client import RecoveryClient

        recover_at = time.monotonic() + fault.duration
        found = _HOLD.match(detail)
        if found is None:
            raise RuntimeError(f"unexpected hold line {detail!r}")
        txn, tid = int(found.group(1)), found.group(2)
        params: dict[str, Any] = {"state": found.group(3), "down_s": fault.duration}

        def recovery(hold_in_recovery: bool) -> RecoveryClient:
            return RecoveryClient(
                context.workload,
                user,
                context.run_dir,
                context.handle.bootstrap,
                writer=process,
                txn=txn,
                transactional_id=tid,
                hold_in_recovery=hold_in_recovery,
                log_path=context.run_dir / "logs" / f"crash-{index}.log",
            )

        time.sleep(max(0.0, recover_at - time.monotonic()))  # the writer is down
        if self.crash_recovery:
            first = recovery(True)
            first.start(start_timeout(context))
            params["recovery_killed_at"] = first.wait_hold(context.hold_timeout_s)
            first.kill()
        params["recovered"] = recovery(False).run(context.hold_timeout_s)
        return params
