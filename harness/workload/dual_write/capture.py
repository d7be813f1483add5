"""Capture the dual writers' databases into the run directory (``dual_write_db.json``) at the
end of a run, for the ``dual_write`` checker."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import cast

from ....rundir.dual_write_db import (
    DatabaseContents,
    DbRowJson,
    DbStateJson,
    DualWriteDb,
    write_dual_write_db,
)
from ..config import WorkloadConfig
from .connect import open_database
from .spec import DatabaseSpec


def dual_write_databases(workload: WorkloadConfig) -> list[DatabaseSpec]:
    """The distinct databases the workload's dual writers write to."""
    specs = [getattr(u, "database", None) for u in workload.users]
    return list(dict.fromkeys(s for s in specs if isinstance(s, DatabaseSpec)))


def capture_databases(run_dir: Path, workload: WorkloadConfig) -> Path | None:
    """Write every dual writer database's rows and states; None if the run has none."""
    specs = dual_write_databases(workload)
    if not specs:
        return None
    out: list[DatabaseContents] = []
    for spec in specs:
        db = open_database(spec, run_dir)
        try:
            rows = cast(list[DbRowJson], [asdict(r) for r in db.all_rows()])
            states = [cast(DbStateJson, asdict(s)) for s in db.all_states()]
            out.append({"kind": db.kind, "where": db.where, "rows": rows, "states": states})
        finally:
            db.close()
    contents: DualWriteDb = {"captured_ns": time.time_ns(), "databases": out}
    return write_dual_write_db(run_dir, contents)
