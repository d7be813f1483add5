"""What a run leaves besides its history, as the rules read it: the final cluster state,
metric samples, the fault log, run.json and the dual writers' databases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...rundir.dual_write_db import DualWriteDb
from ...rundir.final_state import FinalState


@dataclass
class RunFacts:
    """What a run leaves besides its history (the run directory's other files)."""

    final_state: FinalState | None = None
    #: metric samples (rows of metrics.parquet); None when the run has no metrics
    metrics: list[dict[str, Any]] | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)
    transaction_max_timeout_ms: int = 900_000
    transaction_timeout_ms: int = 60_000
    #: run.json's contents (started_ns, ended_ns, metrics_supported, ...)
    info: dict[str, Any] = field(default_factory=dict)
    #: the dual writers' databases at the end (dual_write_db.json); None: no dual writers
    dual_write_db: DualWriteDb | None = None
