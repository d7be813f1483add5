"""``txnchaos nightly``: the command line of the nightly loop (harness/nightly/: plan, run,
summarise); every run of the night judged by one judge (one engine, one Spark session)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..harness.cli_input import Duration, InputError, check_bootstrap, check_kafka_version
from ..harness.nightly.plan import PlanError
from ..harness.nightly.shrinking import DEFAULT_SHRINK_BUDGET_S, ShrinkPolicy
from .options import engine_options


@click.command("nightly")
@click.argument("scenarios", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--runs", type=click.IntRange(1), default=None, help="Runs in all (scenarios in rotation)."
)
@click.option(
    "--budget",
    "budget_s",
    type=Duration(),
    default=None,
    help="Wall time to fill instead (90s, 30m, 8h, 1h30m; a bare number is seconds): no run "
    "starts that would not finish in it (estimated from the scenario's earlier runs tonight).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("nightly"),
    show_default=True,
    help="Output root: each night is a new directory in it; trend.html covers them all.",
)
@click.option(
    "--seed-base",
    type=click.IntRange(0, 2**62),
    default=None,
    help="Seed of the first run (then +1 per run); default: new every night, recorded.",
)
@click.option(
    "--launcher",
    type=click.Choice(["local", "docker", "external", "kafka"]),
    default=None,
    help="Run every scenario on this launcher (default: each scenario's own); kafka: on "
    "Apache Kafka's own release.",
)
@click.option(
    "--kafka-version",
    default=None,
    metavar="X.Y.Z",
    callback=check_kafka_version,
    help="The Apache Kafka release of --launcher kafka (default: the launcher's).",
)
@click.option(
    "--bootstrap",
    default=None,
    metavar="HOST:PORT",
    callback=check_bootstrap,
    help="An external cluster (with --launcher external).",
)
@click.option(
    "--duration",
    type=Duration(),
    default=None,
    help="Override every scenario's workload duration (90, 5m; a bare number is seconds).",
)
@click.option(
    "--shrink/--no-shrink",
    default=True,
    show_default=True,
    help="Shrink each unexpectedly invalid run to a minimal reproducer (txnchaos shrink: "
    "re-runs on the same seed); its row links RUN/shrunk.yaml. Exit codes are unchanged.",
)
@click.option(
    "--shrink-budget",
    "shrink_budget_s",
    type=Duration(),
    default=None,
    help=f"Wall time of re-runs per invalid run (default {DEFAULT_SHRINK_BUDGET_S / 60:g}m; "
    "never more than a --budget night has left).",
)
@engine_options
def nightly_command(
    scenarios: tuple[Path, ...],
    runs: int | None,
    budget_s: float | None,
    out: Path,
    seed_base: int | None,
    launcher: str | None,
    kafka_version: str | None,
    bootstrap: str | None,
    duration: float | None,
    shrink: bool,
    shrink_budget_s: float | None,
    engine: str,
    spark_master: str | None,
    spark_conf: dict[str, str],
) -> None:
    """Run scenarios (files, or directories of *.yaml; default scenarios/nightly) again
    and again with new seeds, one after another, for --runs N runs or a --budget of wall
    time. Every run directory is kept. The night's directory under --out gets
    summary.json, summary.html (one row per run, links to each report) and junit.xml
    (one test case per run); --out/trend.html compares the nights.

    Exit code 0: every run had its scenario's expected verdict; 1: a run did not; 2: a
    run's harness failed, the night was interrupted, or the input is bad.
    """
    if (runs is None) == (budget_s is None):
        raise click.UsageError("give exactly one of --runs N and --budget DURATION")
    if launcher == "external" and not bootstrap:
        raise click.UsageError("--launcher external needs --bootstrap HOST:PORT")
    if kafka_version is not None and launcher != "kafka":
        raise click.UsageError("--kafka-version is for --launcher kafka")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is not a directory")
    if not shrink and shrink_budget_s is not None:
        raise click.UsageError("--shrink-budget is for shrinking: not with --no-shrink")
    from ..harness.nightly.command import NightlyOptions, main_nightly
    from .judging import run_judge

    argv = [a for a in sys.argv[1:] if a != "nightly"]
    options = NightlyOptions(
        inputs=list(scenarios) or [Path("scenarios/nightly")],
        out_root=out,
        runs=runs,
        budget_s=budget_s,
        seed_base=seed_base,
        launcher=launcher,
        kafka_version=kafka_version,
        bootstrap=bootstrap,
        duration=duration,
        argv=_without_seed_base(argv),
        shrink=ShrinkPolicy(shrink, shrink_budget_s or DEFAULT_SHRINK_BUDGET_S),
        judge=run_judge(engine, spark_master, "txnchaos nightly", conf=spark_conf),
    )
    try:
        code = main_nightly(options)
    except PlanError as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:
        raise InputError(f"cannot write the night's output: {exc}") from exc
    sys.exit(code)


def _without_seed_base(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--seed-base":
            skip = True
        elif not arg.startswith("--seed-base="):
            out.append(arg)
    return out
