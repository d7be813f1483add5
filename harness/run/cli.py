"""The harness's side of ``txnchaos run``: the scenario and the options that shape the run
(:func:`run_options`), checked before anything starts (:func:`run_setup`), and ``record``,
the run without its judging that the commands running many runs start in a child process
(``python -m txnchaos.harness.run.cli``, see child.py). The ``txnchaos run`` users type adds
what judges the run (jobs/cli.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..cli_input import (
    PORT,
    Cli,
    Duration,
    InputError,
    check_bootstrap,
    check_kafka_version,
    check_metrics_urls,
)

if TYPE_CHECKING:
    from .orchestrator import RunOptions
    from .scenario import Scenario

#: a directory option: a file there is refused up front (it may not exist yet)
DIRECTORY = click.Path(file_okay=False, path_type=Path)

_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.argument("scenario", type=click.Path(path_type=Path)),
    click.option("--seed", type=int, default=None, help="Override the scenario's seed."),
    click.option(
        "--launcher",
        type=click.Choice(["local", "docker", "external", "kafka"]),
        default=None,
        help="Where the cluster runs (default: the scenario's, usually local); kafka: Apache "
        "Kafka's own release as JVMs here (docs/apache-kafka.md).",
    ),
    click.option(
        "--flavour",
        type=click.Choice(["txnchaos", "apache-kafka"]),
        default=None,
        help="What the docker launcher runs: the project's nodes, or Apache Kafka's release in "
        "containers (default: the scenario's cluster.flavour, else txnchaos).",
    ),
    click.option(
        "--kafka-version",
        default=None,
        metavar="X.Y.Z",
        callback=check_kafka_version,
        help="The Apache Kafka release of --launcher kafka or --flavour apache-kafka (default: "
        "the scenario's cluster.kafka_version, else 4.4.0); fetched from Maven Central on first "
        "use.",
    ),
    click.option(
        "--bootstrap",
        default=None,
        metavar="HOST:PORT",
        callback=check_bootstrap,
        help="An external cluster.",
    ),
    click.option(
        "--metrics-url",
        "metrics_urls",
        multiple=True,
        metavar="NODE=URL",
        callback=check_metrics_urls,
        help="An external cluster node's Prometheus /metrics URL (repeat per node; replaces the "
        "scenario's cluster.metrics): scraped during the run, judged by the metrics checker.",
    ),
    click.option(
        "--duration",
        type=Duration(),
        default=None,
        help="Workload duration (90, 90s, 5m, 1h30m; a bare number is seconds).",
    ),
    click.option(
        "--out",
        type=DIRECTORY,
        default=None,
        help="Run directory (default: runs/<scenario>-<time>-seed<N>).",
    ),
    click.option("--web", is_flag=True, help="Open locust's web UI (load tests); prints its URL."),
    click.option(
        "--web-host",
        default=None,
        metavar="HOST",
        help="Address the web UI listens on (with --web; default 127.0.0.1).",
    ),
    click.option(
        "--web-port",
        type=PORT,
        default=None,
        help="Port of the web UI (with --web; default or 0: a free one).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(0, 256),
        default=0,
        help="locust's distributed mode: a master and this many worker processes here.",
    ),
    click.option(
        "--expect-workers",
        type=click.IntRange(0, 10_000),
        default=0,
        help="Workers from other machines (`txnchaos worker`) the master waits for.",
    ),
    click.option(
        "--master-bind",
        default=None,
        metavar="HOST",
        help="Address locust's master listens on (with --workers/--expect-workers; "
        "default 127.0.0.1; 0.0.0.0 for other machines' workers).",
    ),
    click.option(
        "--master-port",
        type=PORT,
        default=None,
        help="Port of locust's master (default or 0: a free one).",
    ),
    click.option(
        "--csv",
        "csv_prefix",
        default=None,
        metavar="PREFIX",
        help="locust's CSV files, as `locust --csv` writes them: PREFIX_stats.csv, "
        "PREFIX_stats_history.csv, PREFIX_failures.csv, PREFIX_exceptions.csv.",
    ),
    click.option(
        "--csv-full-history",
        is_flag=True,
        help="With --csv: every operation's rows in PREFIX_stats_history.csv, not only the total.",
    ),
    click.option(
        "--html",
        "html_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help="locust's HTML report (requests, failures, users and requests/s over time), as "
        "`locust --html` writes it.",
    ),
]

#: the parameters :func:`run_options` adds, which :func:`run_setup` takes
RUN_PARAMETERS = (
    "scenario",
    "seed",
    "launcher",
    "flavour",
    "kafka_version",
    "bootstrap",
    "metrics_urls",
    "duration",
    "out",
    "web",
    "web_host",
    "web_port",
    "workers",
    "expect_workers",
    "master_bind",
    "master_port",
    "csv_prefix",
    "csv_full_history",
    "html_file",
)


def run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The scenario argument and the options of a run, in the order ``--help`` lists them."""
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def run_setup(
    scenario: Path,
    seed: int | None,
    launcher: str | None,
    flavour: str | None,
    kafka_version: str | None,
    bootstrap: str | None,
    metrics_urls: dict[int, str],
    duration: float | None,
    out: Path | None,
    web: bool,
    web_host: str | None,
    web_port: int | None,
    workers: int,
    expect_workers: int,
    master_bind: str | None,
    master_port: int | None,
    csv_prefix: str | None,
    csv_full_history: bool,
    html_file: Path | None,
) -> tuple[Scenario, RunOptions]:
    """The scenario and the run's options, every one checked (bad input: InputError or a
    usage error, before anything starts)."""
    from ..workload.web import WebAddressError, check_web_address
    from .orchestrator import RunOptions
    from .scenario import ScenarioError, load_scenario

    if not web and (web_host is not None or web_port is not None):
        raise click.UsageError("--web-host and --web-port need --web")
    distributed = workers + expect_workers > 0
    if not distributed and (master_bind is not None or master_port is not None):
        raise click.UsageError("--master-bind and --master-port need --workers or --expect-workers")
    if csv_full_history and not csv_prefix:
        raise click.UsageError("--csv-full-history needs --csv PREFIX")

    try:
        parsed = load_scenario(scenario)
    except ScenarioError as exc:
        raise InputError(str(exc)) from exc
    if out is not None and out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {out} exists and is not empty: give a new run directory")
    _check_actions_heal(parsed, scenario, duration)
    external = (launcher or parsed.cluster.launcher) == "external"
    master_bind = master_bind or "127.0.0.1"
    if distributed:
        try:
            check_web_address(master_bind, master_port, "--master-bind", "locust's master")
        except WebAddressError as exc:
            raise InputError(str(exc)) from exc
    if external and not (bootstrap or parsed.cluster.bootstrap):
        raise click.UsageError("an external cluster needs --bootstrap HOST:PORT")
    if metrics_urls and not external:
        raise click.UsageError("--metrics-url is for an external cluster (--launcher external)")
    web_host = web_host or "127.0.0.1"
    if web:
        try:
            check_web_address(web_host, web_port)
        except WebAddressError as exc:
            raise InputError(str(exc)) from exc
    where = launcher or parsed.cluster.launcher
    what = flavour or parsed.cluster.flavour
    if flavour is not None and where != "docker":
        raise click.UsageError("--flavour is for the docker launcher (--launcher docker)")
    on_kafka = where == "kafka" or (where == "docker" and what == "apache-kafka")
    if kafka_version is not None and not on_kafka:
        raise click.UsageError(
            "--kafka-version is for the kafka launcher (--launcher kafka) or the docker "
            "launcher's apache-kafka flavour"
        )
    if on_kafka:
        _check_runs_on_kafka(parsed, scenario, kafka_version or parsed.cluster.kafka_version)
    options = RunOptions(
        seed=seed,
        launcher=launcher,
        kafka_version=kafka_version,
        flavour=flavour,
        bootstrap=bootstrap,
        metrics=metrics_urls or None,
        duration=duration,
        out=out,
        web=web,
        web_host=web_host,
        web_port=web_port or None,
        workers=workers,
        expect_workers=expect_workers,
        master_bind=master_bind,
        master_port=master_port or None,
        csv_prefix=str(Path(csv_prefix).resolve()) if csv_prefix else None,
        csv_full_history=csv_full_history,
        html_file=html_file.resolve() if html_file else None,
    )
    return parsed, options


def _check_runs_on_kafka(parsed: Scenario, scenario: Path, version: str | None) -> None:
    """What the scenario needs, Apache Kafka's release has: settings its nodes can take (no
    bug switch of the project's cluster), KIP-939 recovery for dual writers; checked before a
    cluster starts."""
    from ..launch.errors import LaunchError
    from ..launch.kafka.layout import split_settings
    from ..launch.kafka.release import DEFAULT_VERSION, KafkaRelease
    from ..workload.kinds.registry import user_kind

    try:
        split_settings(parsed.cluster.setting_pairs())
        release = KafkaRelease.parse(version or DEFAULT_VERSION)
    except LaunchError as exc:
        raise InputError(f"{scenario}: cluster.settings: {exc}") from exc
    writers = [
        str(u.name or u.kind)
        for u in parsed.workload.users
        if user_kind(u.kind).keeps_prepared_transactions
    ]
    if writers and not release.recovers_prepared_transactions:
        raise InputError(
            f"{scenario}: users {', '.join(writers)} take their prepared "
            f"transaction back with KIP-939's InitProducerId keepPreparedTxn, which Apache Kafka "
            f"{release} does not implement (UNSUPPORTED_VERSION; "
            "docs/findings/kip-939-keep-prepared-txn-not-implemented.md)"
        )


def _check_actions_heal(parsed: Scenario, scenario: Path, duration: float | None) -> None:
    """Every explicit fault ends within the workload (as the nemesis requires), checked
    before a cluster starts rather than after."""
    from .scenario import fault_outlasting_workload

    problem = fault_outlasting_workload(parsed, scenario, duration)
    if problem:
        raise InputError(problem)


@click.command("record")
@run_options
def record(**params: Any) -> None:
    """Run a scenario and record it, without judging it (exit code 0: recorded; 2: the
    harness failed). The commands that run many runs start this in a child process and
    judge each run themselves."""
    from .orchestrator import run_scenario

    scenario, options = run_setup(**params)
    sys.exit(run_scenario(scenario, options))


@click.group(name="txnchaos", cls=Cli)
def main() -> None:
    """The harness's run, for a child process: ``python -m txnchaos.harness.run.cli record``."""


main.add_command(record)

if __name__ == "__main__":
    main(prog_name="txnchaos")
