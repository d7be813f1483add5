"""``txnchaos worker``: a locust worker on this machine for a ``txnchaos run`` master elsewhere.

The master (``txnchaos run SCENARIO --expect-workers N --master-bind 0.0.0.0``) tells its
workers how many users of which kind to run; each worker runs them against the cluster and
writes their histories (one file per user process, named after the worker's index, so the
files of all workers merge) under ``--out``: the master's run directory on a shared mount,
or a directory whose ``history/`` is copied into the run directory before it is judged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..cli_input import InputError, check_bootstrap

RUNNER = "txnchaos.harness.workload.runner"


@click.command("worker")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--master-host", required=True, metavar="HOST", help="The master's address.")
@click.option(
    "--master-port",
    type=click.IntRange(1, 65535),
    default=5557,
    show_default=True,
    help="The master's port (`txnchaos run` prints it; --master-port there fixes it).",
)
@click.option(
    "--bootstrap",
    default=None,
    metavar="HOST:PORT",
    callback=check_bootstrap,
    help="The cluster (default: the scenario's cluster.bootstrap).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Where the users' histories go (history/ inside): the run directory, shared.",
)
@click.option("--seed", type=int, default=None, help="The run's seed (default: the scenario's).")
def worker_command(
    scenario: Path,
    master_host: str,
    master_port: int,
    bootstrap: str | None,
    out: Path,
    seed: int | None,
) -> None:
    """Attach a locust worker to a distributed `txnchaos run` on another machine."""
    from .scenario import ScenarioError, load_scenario

    try:
        parsed = load_scenario(scenario)
    except ScenarioError as exc:
        raise InputError(str(exc)) from exc
    bootstrap = bootstrap or parsed.cluster.bootstrap
    if not bootstrap:
        raise click.UsageError("the worker needs --bootstrap HOST:PORT (the run's cluster)")
    if not master_host.strip():
        raise click.UsageError("--master-host is empty")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {out}: {exc.strerror or exc}") from exc
    argv = [sys.executable, "-m", RUNNER, "--config", str(scenario.resolve())]
    argv += ["--bootstrap", bootstrap, "--run-dir", str(out.resolve())]
    argv += ["--worker", "--master-host", master_host, "--master-port", str(master_port)]
    argv += ["--seed", str(parsed.seed if seed is None else seed)]
    sys.stdout.flush()
    os.execv(sys.executable, argv)  # locust must start in a fresh process (see runner.py)
