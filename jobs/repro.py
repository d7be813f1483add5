"""``txnchaos repro``: the command line of the reproduction catalogue (harness/repro/); every
configuration's run judged by one judge (one engine, one Spark session)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from ..harness.cli_input import Duration, InputError, check_bootstrap
from ..harness.console import make_console
from .options import engine_options


@click.command("repro")
@click.argument("name")
@click.option("--config", "config", default=None, help="Run only this configuration.")
@click.option(
    "--tv",
    type=click.IntRange(0, 2),
    default=None,
    help="Run the entry at this transaction.version (its tvN configuration, or every "
    "configuration with transaction.version=N).",
)
@click.option(
    "--kafka-version",
    "kafka_version",
    default=None,
    metavar="V",
    help="Run the entry's configurations on Apache Kafka release V (e.g. 3.5.2); a release "
    "the entry predicts nothing for runs its scenario as it is and reports the verdict. "
    "Configurations on the project's cluster do not run.",
)
@click.option(
    "--cluster",
    "cluster",
    type=click.Choice(["all", "txnchaos", "apache-kafka"]),
    default="all",
    show_default=True,
    help="Run only the configurations on the project's cluster (txnchaos) or on Apache "
    "Kafka releases (apache-kafka).",
)
@click.option("--seed", type=int, default=None, help="Override the entry's seed.")
@click.option(
    "--bootstrap",
    default=None,
    metavar="HOST:PORT",
    callback=check_bootstrap,
    help="Run against an external cluster: report what is found, predict nothing.",
)
@click.option(
    "--duration",
    type=Duration(),
    default=None,
    help="Override the workload duration (90, 90s, 5m; a bare number is seconds).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output directory (default runs/repro-NAME-TIME): one run directory per configuration.",
)
@click.option(
    "--catalogue",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Catalogue directory (default scenarios/repro).",
)
@click.option("--json", "as_json", is_flag=True, help="With `list`: the catalogue as JSON.")
@engine_options
def repro_command(
    name: str,
    config: str | None,
    tv: int | None,
    kafka_version: str | None,
    cluster: str,
    seed: int | None,
    bootstrap: str | None,
    duration: float | None,
    out: Path | None,
    catalogue: Path | None,
    as_json: bool,
    engine: str,
    spark_master: str | None,
    spark_conf: dict[str, str],
) -> None:
    """Reproduce a known hanging-transaction bug: `txnchaos repro list` prints the
    catalogue (name, bug report, fixing pull request, affected and fixed releases, design
    section (KIP), what a user sees, configurations); `txnchaos repro NAME` runs each
    configuration of the entry — on the Apache Kafka releases the report names (affected:
    the bug is found; fixed: valid) and on the project's cluster with the bug present (a
    txnchaos.bug.* switch, or a transaction.version without the defense) and the defense
    on — and compares each verdict with the one predicted. Releases are fetched from Maven
    Central once and cached.

    Exit code 0: every verdict as predicted (the bug detected where present, valid
    where defended); 1: not; 2: bad input or a harness failure. With --bootstrap the
    entry's workload and faults run against that cluster and the verdict is reported
    without a prediction (exit 0 valid, 1 anomalies).
    """
    from ..harness.repro.catalogue import CatalogueError, find, load_catalogue
    from ..harness.repro.command import ReproOptions, catalogue_rows, reproduce, show_catalogue
    from .judging import run_judge

    console = make_console()
    try:
        if name == "list":
            entries = load_catalogue(catalogue)
            if as_json:
                click.echo(json.dumps(catalogue_rows(entries), indent=2))
            else:
                show_catalogue(entries, console)
            return
        entry = find(name, catalogue)
        if bootstrap and (config or tv is not None or kafka_version or cluster != "all"):
            raise click.UsageError(
                "--bootstrap runs the cluster as it is: no --config, --tv, --kafka-version "
                "or --cluster"
            )
        if kafka_version is not None:
            if config is not None or cluster != "all":
                raise click.UsageError(
                    "--kafka-version chooses the configurations itself: "
                    "no --config or --cluster with it"
                )
            from ..harness.launch.errors import LaunchError
            from ..harness.launch.kafka.release import KafkaRelease

            try:
                kafka_version = KafkaRelease.parse(kafka_version).version
            except LaunchError as exc:
                raise InputError(str(exc)) from exc
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = out or Path("runs") / f"repro-{name}-{stamp}"
        if target.exists() and any(target.iterdir()):
            raise InputError(f"--out {target} exists and is not empty")
        judge = run_judge(engine, spark_master, f"txnchaos repro {name}", conf=spark_conf)
        options = ReproOptions(
            target, config, tv, seed, bootstrap, duration, kafka_version, cluster, judge
        )
        code = reproduce(entry, options, console)
    except CatalogueError as exc:
        raise InputError(str(exc)) from exc
    sys.exit(code)
