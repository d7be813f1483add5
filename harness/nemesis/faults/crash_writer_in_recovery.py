"""``crash_writer_in_recovery``: a dual writer killed after its database commit, then its
first recovery killed between the keep-prepared init and the completion; a second recovery
must still commit (the prepared transaction survives both crashes)."""

from __future__ import annotations

from .dual_write_crash import DualWriteCrashFault


class CrashWriterInRecoveryFault(DualWriteCrashFault):
    name = "crash_writer_in_recovery"
    crash_recovery = True
