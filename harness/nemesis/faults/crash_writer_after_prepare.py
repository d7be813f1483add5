"""``crash_writer_after_prepare``: a dual writer killed after prepare, its database commit not
done; recovery must abort the prepared transaction (the database kept its earlier state)."""

from __future__ import annotations

from .dual_write_crash import DualWriteCrashFault


class CrashWriterAfterPrepareFault(DualWriteCrashFault):
    name = "crash_writer_after_prepare"
