"""``crash_writer_after_db_commit``: a dual writer killed after its database commit, before
the Kafka commit; recovery must commit the prepared transaction (the database names it)."""

from __future__ import annotations

from .dual_write_crash import DualWriteCrashFault


class CrashWriterAfterDbCommitFault(DualWriteCrashFault):
    name = "crash_writer_after_db_commit"
