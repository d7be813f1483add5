"""``judge``: every reference checker over one run directory, or over a list of ops."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow.parquet as pq

from ...harness.history.compact import compact_to_parquet, read_faults
from ...harness.history.dual_write_db import read_dual_write_db
from ...harness.history.run_dir import open_run_dir
from . import rules
from .definitions import definition
from .dual_write import dual_write
from .fenced import fenced_commit
from .group_offsets import committed_offsets
from .hanging import RunFacts, hanging_transactions
from .history import Op, read_history
from .indexes import Indexes
from .metrics import metrics
from .probes import refused_request
from .rows import Judged

#: the history checkers, in the pipeline's order
HISTORY_CHECKERS: tuple[Callable[[Indexes], Judged], ...] = (
    rules.aborted_read,
    rules.precommitted_read,
    rules.lost_write,
    rules.duplicate,
    rules.inconsistent_offsets,
    rules.ordering,
    rules.torn_transaction,
    rules.consume_transform_produce,
    rules.indeterminate_commit,
)


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
    (its JSON Lines compacted first when it has no history.parquet, as the Spark pipeline does),
    or the ops of a history; ``facts``: what the run left besides (read from the run directory
    when not given)."""
    if isinstance(source, (str, os.PathLike)):
        run = open_run_dir(source)
        if run.history_parquet is None:
            compact_to_parquet(run.path)
            run = open_run_dir(source)
        assert run.history_parquet is not None
        ops: Sequence[Op] = read_history(run.history_parquet)
        facts = facts or run_facts(Path(source))
    else:
        ops = source
    return judge_indexes(Indexes(ops), facts or RunFacts())


def judge_indexes(ix: Indexes, facts: RunFacts) -> dict[str, Judged]:
    """Per checker, in the order verdicts list them: its anomaly rows, notes and definition."""
    out = [*(check(ix) for check in HISTORY_CHECKERS), fenced_commit(ix.ops)]
    out.append(committed_offsets(ix.ops, facts.final_state))
    out.append(refused_request(ix.ops))
    out.append(hanging_transactions(facts))
    out.append(dual_write(ix.ops, facts.dual_write_db, facts.final_state))
    out.append(metrics(ix, facts))
    for j in out:
        j.definition = definition(j.name)
    return {j.name: j for j in out}
