"""Dual-writer crashes (KIP-939): the writer is killed at a point of its recipe, then the
recovery recipe runs in a process of its own (killed once mid-recovery by
``crash_writer_in_recovery``) until it completes the writer's prepared transaction: a 2PC
transaction never times out, so nothing else would. The writer stays down ``duration``
seconds before its recovery starts (its prepared transaction waits that long)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from .base import FaultContext
from .client_crash import ClientCrashFault

if TYPE_CHECKING:
    from ..schedule import ScheduledFault

_HOLD = re.compile(r"HOLD txn=(\d+) transactional_id=(\S+) state=(\S*)")


class DualWriteCrashFault(ClientCrashFault):
    #: Kill the first recovery too, after its keep-prepared init.
    crash_recovery: bool = False

    def _crash(
        self, context: FaultContext, index: int, fault: ScheduledFault, user: int, hold: str
    ) -> None:
        from ...workload.crash import CrashableClient
        from ...workload.dual_write.recovery_client import RecoveryClient

        started = time.time()
        run_dir = context.run_dir
        logs = run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        client = CrashableClient(
            context.workload,
            user,
            run_dir,
            context.handle.bootstrap,
            hold=hold,
            hold_after=1,
            seed=context.seed + index,
            log_path=logs / f"crash-{index}.log",
        )
        context.activate(index, fault, started, None, f"{self.name}: {client.process}")
        params: dict[str, Any] = {"hold": hold, "action": index}
        try:
            client.start(context.hold_timeout_s)
            detail = client.wait_hold(context.hold_timeout_s)
            client.kill()
            recover_at = time.monotonic() + fault.duration
            found = _HOLD.match(detail)
            if found is None:
                raise RuntimeError(f"unexpected hold line {detail!r}")
            txn, tid = int(found.group(1)), found.group(2)
            params.update({"at": detail, "state": found.group(3), "down_s": fault.duration})

            def recovery(hold_in_recovery: bool) -> RecoveryClient:
                return RecoveryClient(
                    context.workload,
                    user,
                    run_dir,
                    context.handle.bootstrap,
                    writer=client.process,
                    txn=txn,
                    transactional_id=tid,
                    hold_in_recovery=hold_in_recovery,
                    log_path=logs / f"crash-{index}.log",
                )

            time.sleep(max(0.0, recover_at - time.monotonic()))  # the writer is down
            if self.crash_recovery:
                first = recovery(True)
                first.start(context.hold_timeout_s)
                params["recovery_killed_at"] = first.wait_hold(context.hold_timeout_s)
                first.kill()
            params["recovered"] = recovery(False).run(context.hold_timeout_s)
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
