"""The ``txnchaos`` command line: the harness's commands (harness/cli.py: ``node``,
``cluster``, ``worker``, ``fuzz``, ``cleanup``, ``transactions``, ``acls``, ``conformance``)
and the commands that run and judge (``run``, ``analyze``, ``nightly``, ``repro``, ``shrink``,
``demo``). Importing it stays light (no heavy library at import time): each command imports
what it needs when it runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import click

from ..harness.cli import main as harness_commands
from ..harness.cli import version_option
from ..harness.cli_input import Cli, InputError
from ..harness.launch.errors import LaunchError
from ..harness.run.cli import RUN_PARAMETERS, run_options
from .nightly import nightly_command
from .options import check_input_uri, engine_options
from .repro import repro_command
from .shrink import shrink_command

#: a directory option: a file there is refused up front (it may not exist yet)
DIRECTORY = click.Path(file_okay=False, path_type=Path)


@click.group(name="txnchaos", cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@version_option
def main() -> None:
    """txnchaos: chaos testing for transactional (exactly-once) Kafka messaging.

    It runs its own Kafka-protocol cluster (`cluster`, `node`), drives workloads
    through faults, and judges the outcome.

    Exit codes: 0 valid, 1 anomalies found, 2 the harness failed or the input is bad
    (one line on stderr names it).
    """


for _name, _command in harness_commands.commands.items():
    main.add_command(_command, _name)


# ---- txnchaos run --------------------------------------------------------------------
@main.command()
@run_options
@click.option("--no-analyze", is_flag=True, help="Record only; judge later with `analyze`.")
@engine_options
def run(
    no_analyze: bool,
    engine: str,
    spark_master: str | None,
    spark_conf: dict[str, str],
    **params: Any,
) -> None:
    """Run a scenario: cluster, workload and faults, then the verdict, judged by the PySpark
    pipeline (its session starts while the workload runs).

    Exit code 0: valid; 1: anomalies found; 2: the harness itself failed (or was
    interrupted). The run directory keeps the history, fault log, metrics, final
    state, verdict.json and report.html.
    """
    from ..harness.run.cli import run_setup
    from ..harness.run.orchestrator import run_scenario
    from .judging import run_judge

    scenario, options = run_setup(**{k: params[k] for k in RUN_PARAMETERS})
    if not no_analyze:
        if engine != "reference" and shutil.which("java") is None:
            click.echo(
                "txnchaos run: java is not installed: the run will be recorded but PySpark "
                "cannot judge it (scripts/bootstrap.sh installs it; or --engine reference)",
                err=True,
            )
        name = (options.out or Path(scenario.name)).name
        judge = run_judge(engine, spark_master, f"txnchaos run {name}", conf=spark_conf)
        options.judge = judge
    sys.exit(run_scenario(scenario, options))


# ---- txnchaos analyze ----------------------------------------------------------------
@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@engine_options
@click.option(
    "--input-uri",
    default=None,
    metavar="URI",
    callback=check_input_uri,
    help="A copy of RUN_DIR that a cluster's executors read the history and metrics from "
    "(hdfs://, s3a://, file:// on a shared mount; Spark engine). Default on a cluster: RUN_DIR's "
    "absolute path, which must then be on a mount every worker shares.",
)
def analyze(
    run_dir: Path,
    engine: str,
    spark_master: str | None,
    spark_conf: dict[str, str],
    input_uri: str | None,
) -> None:
    """Judge a run directory with the PySpark pipeline (the Spark application is named
    "txnchaos analyze RUN"; its master and application id are printed and recorded in
    verdict.json): write verdict.json and report.html into it and print a summary. A run left
    as JSON Lines (its harness died) is compacted first. Exit code 0: valid; 1: anomalies
    found; 2: the run directory is unreadable (the message says what is missing or broken)."""
    from .judging import analyze_run_dir, run_judge

    if input_uri is not None and engine == "reference":
        raise click.UsageError("--input-uri is for Spark's executors: not with --engine reference")
    name = run_dir.resolve().name
    judge = run_judge(engine, spark_master, f"txnchaos analyze {name}", input_uri, spark_conf)
    sys.exit(analyze_run_dir(run_dir, judge))


# ---- txnchaos demo -------------------------------------------------------------------
@main.command()
@click.option("--brokers", type=click.IntRange(1, 32), default=2, show_default=True)
@click.option("--transactions", type=click.IntRange(min=1), default=500, show_default=True)
@click.option("--partitions", type=click.IntRange(1, 10_000), default=3, show_default=True)
@click.option(
    "--data-dir",
    type=DIRECTORY,
    default=None,
    help="Cluster data (default: a fresh temporary directory, removed afterwards).",
)
def demo(brokers: int, transactions: int, partitions: int, data_dir: Path | None) -> None:
    """Start a local cluster, run transactions (some aborted) and read them back with
    read_committed, recording the run; stop the cluster and judge the run with the
    analysis's reference checkers (with --data-dir, the run directory stays in DIR/run)."""
    from .demo import run_smoke

    if data_dir is not None and (data_dir / "run").exists():
        raise InputError(f"--data-dir {data_dir} already holds a demo run ({data_dir / 'run'})")
    try:
        code = run_smoke(
            brokers=brokers, transactions=transactions, partitions=partitions, data_dir=data_dir
        )
    except LaunchError as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:  # the data directory cannot be made or written
        raise InputError(f"cannot use the data directory: {exc}") from exc
    sys.exit(code)


# ---- txnchaos nightly, repro, shrink ---------------------------------------------------
main.add_command(nightly_command)
main.add_command(repro_command)
main.add_command(shrink_command)


if __name__ == "__main__":
    main(prog_name="txnchaos")  # not "python -m txnchaos.jobs.cli" in messages
