"""``txnchaos demo``: the smoke run (harness/smoke.py: a local cluster, transactions, some
aborted, read back with read_committed, recorded as a run directory), judged by the
analysis's plain-Python rules (no JVM: a demo-sized history takes well under a second), the
same rules the Spark pipeline of ``txnchaos analyze`` is held equal to."""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.table import Table

from ..analysis.reference import Judged, judge
from ..analysis.verdict import INVALID, UNKNOWN, VALID
from ..harness.console import make_console
from ..harness.launch.owner import owned_temp_dir
from ..harness.smoke import record_run, workload_table
from ..rundir.compact import compact_run


def status_of(judged: Judged) -> str:
    """A checker's status as the verdict states it."""
    if judged.unknown is not None:
        return UNKNOWN
    return INVALID if judged.rows else VALID


def judge_run(run_dir: Path) -> tuple[str, Table]:
    """The run's verdict from the plain rules, and a table of what each found (its JSON Lines
    compacted first: the recorder leaves them as written)."""
    compact_run(run_dir)
    results = judge(run_dir)
    table = Table(title="checkers (analysis/reference: the rules txnchaos analyze applies)")
    table.add_column("checker")
    table.add_column("status")
    table.add_column("anomalies", justify="right")
    table.add_column("detail")
    statuses = set()
    for name, judged in results.items():
        status = status_of(judged)
        statuses.add(status)
        counts = judged.counts
        detail = judged.unknown or ", ".join(f"{k}={v}" for k, v in counts.items() if v)
        table.add_row(name, status, str(sum(counts.values())), detail)
    if INVALID in statuses:
        return INVALID, table
    return (UNKNOWN if statuses == {UNKNOWN} else VALID), table


def run_smoke(*, brokers: int, transactions: int, partitions: int, data_dir: Path | None) -> int:
    """Record and judge a smoke run: 0 valid (or unknown), 1 anomalies found. With
    ``data_dir`` the run directory stays in ``data_dir/run`` (``txnchaos analyze`` reads it)."""
    console = make_console()
    temp = data_dir is None
    root = owned_temp_dir("demo-") if data_dir is None else data_dir
    run_dir = root / "run"
    try:
        result = record_run(
            run_dir, root, brokers=brokers, transactions=transactions, partitions=partitions
        )
        console.print(workload_table(result))
        status, checkers = judge_run(run_dir)
        console.print(checkers)
    finally:
        if temp:
            shutil.rmtree(root, ignore_errors=True)
    for problem in result.problems:
        console.print(f"[red]problem:[/] {problem}")
    if not temp:
        console.print(f"run directory: {run_dir}")
    console.print(
        "[bold red]verdict: INVALID[/]"
        if status == INVALID
        else f"[bold green]verdict: {status}[/]"
    )
    return 1 if status == INVALID else 0
