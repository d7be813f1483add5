"""``judge``: every rule (rules/registry.py) over one run directory, or over a list of ops, in
plain Python."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from ...rundir.compact import read_faults
from ...rundir.dual_write_db import read_dual_write_db
from ...rundir.run_dir import RunDirError, open_run_dir
from ..model.facts import RunFacts
from ..model.history import Op, read_history
from ..model.indexes import Indexes
from ..model.judged import Judged
from ..rules.registry import RULES


def run_facts(path: str | os.PathLike[str]) -> RunFacts:
    """The final state, metric samples, faults and timeouts of a run directory (as the Spark
    pipeline loads them: no metrics when the run says the cluster exposes none)."""
    run = open_run_dir(path)
    metrics = None
    if run.metrics_parquet is not None and run.info.get("metrics_supported", True):
        metrics = pq.read_table(run.metrics_parquet).to_pylist()
    return RunFacts(
        final_state=run.final_state,
        metrics=metrics,
        faults=read_faults(run.path).to_pylist(),
        transaction_max_timeout_ms=run.transaction_max_timeout_ms,
        transaction_timeout_ms=run.transaction_timeout_ms,
        info=dict(run.info),
        dual_write_db=read_dual_write_db(run.path),
    )


def judge(
    source: str | os.PathLike[str] | Sequence[Op], facts: RunFacts | None = None
) -> dict[str, Judged]:
    """Per checker: its anomaly rows (or why it could not judge).  ``source``: a run directory
    (compacted: its history.parquet), or the ops of a history; ``facts``: what the run left
    besides (read from the run directory when not given)."""
    if isinstance(source, (str, os.PathLike)):
        run = open_run_dir(source)
        if run.history_parquet is None:
            raise RunDirError(f"{run.path} has no history.parquet: it was not compacted")
        ops: Sequence[Op] = read_history(run.history_parquet)
        facts = facts or run_facts(Path(source))
    else:
        ops = source
    return judge_indexes(Indexes(ops), facts or RunFacts())


def judge_indexes(ix: Indexes, facts: RunFacts) -> dict[str, Judged]:
    """Per checker, in the order verdicts list them: its anomaly rows and notes."""
    return {r.NAME: r.rule(ix, facts) for r in RULES}
