"""Running a reproduction: each configuration becomes an ordinary scenario file (the
entry's cluster settings plus the configuration's, its prediction as the expected
verdict, and — for a configuration naming an Apache Kafka release — the kafka launcher
at that release), run by ``txnchaos run`` in its own process; then each verdict is held
against its prediction."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from ...cluster.settings import render_setting
from ...rundir.verdict_file import NODE_ERROR, anomalies_by_checker
from ..nightly.results import HARNESS_FAILED
from ..run.child import run_in_child
from ..run.judge import Judge
from ..run.scenario import load_scenario
from .catalogue import CatalogueError, Entry, kafka_problem
from .spec import APACHE_KAFKA, OURS, Configuration

#: ``--cluster``: which configurations run
CLUSTERS = ("all", OURS, APACHE_KAFKA)
#: settings every run on an Apache Kafka release starts from (the entry's and the
#: configuration's own override them): Kafka creates its 50 transaction-log and 50
#: offsets partitions one by one on the first client's request, which took 30+ s on a
#: loaded 2-core machine (measured on 3.5.2: every InitProducerId timed out meanwhile)
KAFKA_DEFAULTS: dict[str, str | int | bool] = {
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
}

EXIT_MATCHED, EXIT_MISMATCH, EXIT_HARNESS_FAILED = 0, 1, 2


@dataclass
class Outcome:
    configuration: str
    predicted: str  # "invalid (hanging_transactions)", or "-" against an external cluster
    verdict: str  # valid | invalid | harness_failed
    anomalies: dict[str, int] = field(default_factory=dict)
    matched: bool | None = None  # None: nothing predicted
    run_dir: str = ""
    wall_s: float = 0.0
    cluster: str = "txnchaos"  # txnchaos, Apache Kafka V, or external


def chosen(
    entry: Entry,
    config: str | None,
    tv: int | None,
    kafka_version: str | None = None,
    cluster: str = "all",
) -> dict[str, Configuration]:
    """The configurations to run: the one named; those on Apache Kafka ``kafka_version``
    (``--kafka-version V``; none: see :func:`unpredicted_release`); those on one kind of
    cluster (``--cluster``); of these, the entry's ``tvN`` for ``--tv N``, or all (``--tv``
    on an entry without tvN configurations sets transaction.version on each of them)."""
    configs = entry.spec.configurations
    if config is not None:
        if config not in configs:
            raise CatalogueError(
                f"{entry.name} has no configuration {config!r}; it has: {', '.join(configs)}"
            )
        return {config: configs[config]}
    if kafka_version is not None:
        configs = {n: c for n, c in configs.items() if c.kafka_version == kafka_version}
    elif cluster != "all":
        configs = {n: c for n, c in configs.items() if c.flavour == cluster}
        if not configs:
            raise CatalogueError(f"{entry.name} has no configuration on a {cluster} cluster")
    if tv is not None:
        if f"tv{tv}" in configs:
            return {f"tv{tv}": configs[f"tv{tv}"]}
        if any(name.startswith("tv") and name[2:].isdigit() for name in configs):
            raise CatalogueError(f"{entry.name} predicts nothing for transaction.version {tv}")
        return {
            name: c.model_copy(update={"settings": {**c.settings, "transaction.version": tv}})
            for name, c in configs.items()
        }
    return dict(configs)


def unpredicted_release(entry: Entry, kafka_version: str) -> str:
    """The run's name when ``--kafka-version V`` names a release the entry predicts
    nothing for: the entry's scenario runs on that release as it is, and its verdict is
    reported (as against an external cluster). Refused when the entry's own settings are
    not Kafka's."""
    problem = kafka_problem(entry.scenario.cluster.settings)
    if problem:
        raise CatalogueError(f"{entry.name} cannot run on Apache Kafka: {problem}")
    return f"kafka-{kafka_version}"


def derived_scenario(
    entry: Entry,
    config: Configuration | None,
    seed: int | None,
    name: str | None = None,
    kafka_version: str | None = None,
) -> dict[str, Any]:
    """The entry's scenario file, as data, run under one configuration (None: as it is,
    predicting nothing): its settings added, its prediction as the expected verdict, the
    kafka launcher at the configuration's release (or ``kafka_version``'s) if it names
    one, its ``repro:`` block naming the configuration ``name`` (the run's report says which
    entry and configuration ran, and what the defended configurations would have done)."""
    data = yaml.safe_load(entry.path.read_text())
    repro = data.get("repro")
    if isinstance(repro, dict):
        repro.pop("configuration", None)
        if config is not None and name is not None:
            repro["configuration"] = name
    cluster = data.setdefault("cluster", {})
    if config is not None:
        cluster["settings"] = {**(cluster.get("settings") or {}), **config.settings}
        data["expect"] = config.expect.model_dump()
        kafka_version = config.kafka_version or kafka_version
    if kafka_version is not None:
        cluster["launcher"] = "kafka"
        cluster["kafka_version"] = kafka_version
        cluster["settings"] = {**KAFKA_DEFAULTS, **(cluster.get("settings") or {})}
    if seed is not None:
        data["seed"] = seed
    return dict(data)


def write_scenario(data: dict[str, Any], path: Path) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_scenario(path)  # the derived file is valid whenever its entry is


def predicted_text(config: Configuration) -> str:
    names = ", ".join(config.expect.anomalies)
    return f"{config.expect.verdict} ({names})" if names else config.expect.verdict


def outcome_of(run_dir: Path, exit_code: int) -> tuple[str, dict[str, int]]:
    """The run's verdict and what found anomalies: each invalid checker's count, and
    ``node_error`` (how many times the nodes raised) when the nodes' logs show an exception
    that escaped their code (the verdict's findings: KAFKA-19367's "Illegal new producer
    epoch", say), so an entry can predict it like a checker."""
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return HARNESS_FAILED, {}
    status = verdict.get("status") if isinstance(verdict, dict) else None
    if exit_code not in (0, 1) or status not in ("valid", "invalid"):
        return HARNESS_FAILED, {}
    found = anomalies_by_checker(verdict)
    errors = [f for f in verdict.get("findings") or [] if f.get("kind") == NODE_ERROR]
    if errors:
        found[NODE_ERROR] = sum(int(f.get("count") or 1) for f in errors)
    return str(status), found


def matches(config: Configuration, verdict: str, anomalies: dict[str, int]) -> bool:
    if verdict != config.expect.verdict:
        return False
    return set(config.expect.anomalies) <= set(anomalies)


@dataclass
class ReproOptions:
    out: Path
    config: str | None = None
    tv: int | None = None
    seed: int | None = None
    bootstrap: str | None = None
    duration: float | None = None
    kafka_version: str | None = None
    cluster: str = "all"
    #: judges every configuration's run (one engine for all of them); None: not run
    judge: Judge | None = None


def run_one(scenario_file: Path, run_dir: Path, options: ReproOptions) -> tuple[int, float]:
    extra: list[str] = []
    if options.bootstrap:
        extra += ["--launcher", "external", "--bootstrap", options.bootstrap]
    if options.duration is not None:
        extra += ["--duration", f"{options.duration:g}"]
    assert options.judge is not None, "a reproduction's runs need a judge"
    return run_in_child(scenario_file, run_dir, options.judge, extra)


def reproduce(entry: Entry, options: ReproOptions, console: Console) -> int:
    spec = entry.spec
    console.print(f"[bold]{entry.name}[/] — {spec.report} ({spec.design_section})")
    console.print(f"  {spec.symptom}")
    release = options.kafka_version
    if options.bootstrap:
        runs: list[tuple[str, Configuration | None]] = [("external", None)]
        console.print("  an external cluster: its settings are its own, nothing is predicted")
    else:
        runs = list(chosen(entry, options.config, options.tv, release, options.cluster).items())
        if not runs and release is not None:
            runs = [(unpredicted_release(entry, release), None)]
            console.print(
                f"  {entry.name} predicts nothing for Apache Kafka {release}: its scenario "
                "runs there as it is and the verdict is reported"
            )
    options.out.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    for name, config in runs:
        scenario = derived_scenario(entry, config, options.seed, name, release)
        scenario_file = options.out / f"{name}.yaml"
        write_scenario(scenario, scenario_file)
        run_dir = options.out / name
        where = cluster_text(config, options)
        pairs = (config.settings if config else {}).items()
        settings = ", ".join(f"{k}={render_setting(v)}" for k, v in pairs)
        console.rule(f"{entry.name} / {name} on {where}" + (f": {settings}" if settings else ""))
        code, wall = run_one(scenario_file, run_dir, options)
        verdict, anomalies = outcome_of(run_dir, code)
        outcomes.append(
            Outcome(
                configuration=name,
                predicted=predicted_text(config) if config else "-",
                verdict=verdict,
                anomalies=anomalies,
                matched=None if config is None else matches(config, verdict, anomalies),
                run_dir=str(run_dir),
                wall_s=round(wall, 1),
                cluster=where,
            )
        )
    show(entry, outcomes, console)
    (options.out / "repro.json").write_text(
        json.dumps(
            {
                "name": entry.name,
                "report": spec.report,
                "seed": options.seed if options.seed is not None else entry.scenario.seed,
                "outcomes": [o.__dict__ for o in outcomes],
            },
            indent=2,
        )
        + "\n"
    )
    if any(o.verdict == HARNESS_FAILED for o in outcomes):
        return EXIT_HARNESS_FAILED
    if all(o.matched is None for o in outcomes):  # an external cluster, an unpredicted release
        return EXIT_MATCHED if all(o.verdict == "valid" for o in outcomes) else EXIT_MISMATCH
    return EXIT_MATCHED if all(o.matched for o in outcomes) else EXIT_MISMATCH


def cluster_text(config: Configuration | None, options: ReproOptions) -> str:
    if options.bootstrap:
        return "external"
    if config is None:
        return f"Apache Kafka {options.kafka_version}" if options.kafka_version else "txnchaos"
    return config.cluster_text


def show(entry: Entry, outcomes: list[Outcome], console: Console) -> None:
    table = Table(title=f"{entry.name}: {entry.spec.report}")
    for column in ("configuration", "cluster", "predicted", "verdict"):
        table.add_column(column)
    table.add_column("checkers that found anomalies")
    table.add_column("as predicted")
    for o in outcomes:
        found = ", ".join(f"{k} ({v})" for k, v in sorted(o.anomalies.items())) or "-"
        mark = "-" if o.matched is None else "[green]yes[/]" if o.matched else "[red]NO[/]"
        table.add_row(o.configuration, o.cluster, o.predicted, o.verdict, found, mark)
    console.print(table)
    for o in outcomes:
        console.print(f"  {o.configuration}: {o.run_dir}/report.html ({o.wall_s:.0f}s)")


def catalogue_rows(entries: dict[str, Entry]) -> list[dict[str, Any]]:
    return [
        {
            "name": e.name,
            "report": e.spec.report,
            "design_section": e.spec.design_section,
            "symptom": e.spec.symptom,
            "fixed_by": e.spec.fixed_by,
            "affects": e.spec.affects,
            "fixed_in": e.spec.fixed_in,
            "configurations": {
                name: {
                    "cluster": c.cluster_text,
                    "settings": c.settings,
                    "predicts": predicted_text(c),
                }
                for name, c in e.spec.configurations.items()
            },
            "file": str(e.path),
        }
        for e in entries.values()
    ]


def show_catalogue(entries: dict[str, Entry], console: Console) -> None:
    """One block per entry (a table's columns would truncate the names on a terminal)."""
    for row in catalogue_rows(entries):
        console.print(f"[bold]{row['name']}[/]  {row['report']}", soft_wrap=True)
        console.print(f"  design section (KIP): {row['design_section']}", soft_wrap=True)
        console.print(f"  a user sees:  {row['symptom']}", soft_wrap=True)
        if row["affects"] or row["fixed_in"]:
            affects, fixed = ", ".join(row["affects"]) or "?", ", ".join(row["fixed_in"]) or "?"
            console.print(f"  affects: {affects}; fixed in: {fixed}", soft_wrap=True)
        if row["fixed_by"]:
            console.print(f"  fixed by: {', '.join(row['fixed_by'])}", soft_wrap=True)
        for name, c in row["configurations"].items():
            settings = ", ".join(f"{k}={render_setting(v)}" for k, v in c["settings"].items())
            settings = settings or "as shipped"
            console.print(
                f"  {name} ({c['cluster']}): {settings} -> {c['predicts']}", soft_wrap=True
            )
        console.print(f"  run: txnchaos repro {row['name']}", soft_wrap=True)
        console.print()
