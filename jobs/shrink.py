"""``txnchaos shrink``: the command line of the reproducer shrinker (harness/shrink/); every
re-run judged by one judge (one engine, one Spark session)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..harness.cli_input import Duration, InputError
from .options import engine_options


@click.command("shrink")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--budget",
    type=Duration(),
    default="30m",
    show_default=True,
    help="Wall time of re-running at most (90s, 30m, 1h; a bare number is seconds); the "
    "smallest failing scenario so far is kept.",
)
@click.option(
    "--anomaly",
    "anomalies",
    multiple=True,
    metavar="CHECKER",
    help="The checker(s) that must keep flagging a smaller scenario (repeatable; default: "
    "every checker that flagged the run except metrics).",
)
@click.option(
    "--scenario",
    "scenario_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The run's scenario file, for a run directory without scenario.yaml.",
)
@engine_options
def shrink_command(
    run_dir: Path,
    budget: float,
    anomalies: tuple[str, ...],
    scenario_file: Path | None,
    engine: str,
    spark_master: str | None,
    spark_conf: dict[str, str],
) -> None:
    """Shrink an invalid run to a minimal reproducer: re-run it on the same seed with
    fewer faults (delta debugging over the schedule), a shorter workload and fewer users,
    keeping each step that still yields the same anomaly class, within --budget.
    Writes RUN_DIR/shrunk.yaml (its header: the re-runs it took, the size before and
    after); the re-runs are kept in RUN_DIR/shrink/.

    Exit code 0: shrunk.yaml written; 1: the anomaly did not come back on a re-run;
    2: bad input (not an invalid run, no scenario).
    """
    from ..harness.shrink.command import ShrinkError, main_shrink
    from .judging import run_judge

    judge = run_judge(engine, spark_master, f"txnchaos shrink {run_dir.name}", conf=spark_conf)
    try:
        code = main_shrink(run_dir, budget, list(anomalies), scenario_file, judge)
    except ShrinkError as exc:
        raise InputError(str(exc)) from exc
    sys.exit(code)
