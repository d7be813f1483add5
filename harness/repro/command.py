"""Running a reproduction: each configuration becomes an ordinary scenario file (the
entry's cluster settings plus the configuration's, its prediction as the expected
verdict), run by ``txnchaos run`` in its own process; then each verdict is held
against its prediction."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from ...analysis.verdict import anomalies_by_checker
from ...cluster.settings import render_setting
from ..nightly.results import HARNESS_FAILED
from ..run.child import run_in_child
from ..run.scenario import load_scenario
from .catalogue import CatalogueError, Entry
from .spec import Configuration

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


def chosen(entry: Entry, config: str | None, tv: int | None) -> dict[str, Configuration]:
    """The configurations to run: the one named, the entry's ``tvN`` for ``--tv N``, or
    all; ``--tv`` on an entry without tvN configurations sets transaction.version on
    each of them."""
    configs = entry.spec.configurations
    if config is not None:
        if config not in configs:
            raise CatalogueError(
                f"{entry.name} has no configuration {config!r}; it has: {', '.join(configs)}"
            )
        return {config: configs[config]}
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


def derived_scenario(
    entry: Entry, config: Configuration | None, seed: int | None, name: str | None = None
) -> dict[str, Any]:
    """The entry's scenario file, as data, run under one configuration (None: as it is,
    predicting nothing): its settings added, its prediction as the expected verdict, its
    ``repro:`` block naming the configuration ``name`` (the run's report says which entry and
    configuration ran, and what the defended configurations would have done)."""
    data = yaml.safe_load(entry.path.read_text())
    repro = data.get("repro")
    if isinstance(repro, dict):
        repro.pop("configuration", None)
        if config is not None and name is not None:
            repro["configuration"] = name
    if config is not None:
        cluster = data.setdefault("cluster", {})
        cluster["settings"] = {**(cluster.get("settings") or {}), **config.settings}
        data["expect"] = config.expect.model_dump()
    if seed is not None:
        data["seed"] = seed
    return dict(data)


def write_scenario(data: dict[str, Any], path: Path) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_scenario(path)  # the derived file is valid whenever its entry is


def predicted_text(config: Configuration) -> str:
    names = ", ".join(config.expect.anomalies)
    return f"{config.expect.verdict} ({names})" if names else config.expect.verdict


def judge(run_dir: Path, exit_code: int) -> tuple[str, dict[str, int]]:
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return HARNESS_FAILED, {}
    status = verdict.get("status") if isinstance(verdict, dict) else None
    if exit_code not in (0, 1) or status not in ("valid", "invalid"):
        return HARNESS_FAILED, {}
    return str(status), anomalies_by_checker(verdict)


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


def run_one(scenario_file: Path, run_dir: Path, options: ReproOptions) -> tuple[int, float]:
    extra: list[str] = []
    if options.bootstrap:
        extra += ["--launcher", "external", "--bootstrap", options.bootstrap]
    if options.duration is not None:
        extra += ["--duration", f"{options.duration:g}"]
    return run_in_child(scenario_file, run_dir, extra)


def reproduce(entry: Entry, options: ReproOptions, console: Console) -> int:
    spec = entry.spec
    console.print(f"[bold]{entry.name}[/] — {spec.report} ({spec.design_section})")
    console.print(f"  {spec.symptom}")
    if options.bootstrap:
        runs: list[tuple[str, Configuration | None]] = [("external", None)]
        console.print("  an external cluster: its settings are its own, nothing is predicted")
    else:
        runs = list(chosen(entry, options.config, options.tv).items())
    options.out.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    for name, config in runs:
        scenario = derived_scenario(entry, config, options.seed, name)
        scenario_file = options.out / f"{name}.yaml"
        write_scenario(scenario, scenario_file)
        run_dir = options.out / name
        pairs = (config.settings if config else {}).items()
        settings = ", ".join(f"{k}={render_setting(v)}" for k, v in pairs)
        console.rule(f"{entry.name} / {name}" + (f": {settings}" if settings else ""))
        code, wall = run_one(scenario_file, run_dir, options)
        verdict, anomalies = judge(run_dir, code)
        outcomes.append(
            Outcome(
                configuration=name,
                predicted=predicted_text(config) if config else "-",
                verdict=verdict,
                anomalies=anomalies,
                matched=None if config is None else matches(config, verdict, anomalies),
                run_dir=str(run_dir),
                wall_s=round(wall, 1),
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
    if options.bootstrap:
        return EXIT_MATCHED if outcomes[0].verdict == "valid" else EXIT_MISMATCH
    return EXIT_MATCHED if all(o.matched for o in outcomes) else EXIT_MISMATCH


def show(entry: Entry, outcomes: list[Outcome], console: Console) -> None:
    table = Table(title=f"{entry.name}: {entry.spec.report}")
    for column in ("configuration", "predicted", "verdict", "checkers that found anomalies"):
        table.add_column(column)
    table.add_column("as predicted")
    for o in outcomes:
        found = ", ".join(f"{k} ({v})" for k, v in sorted(o.anomalies.items())) or "-"
        mark = "-" if o.matched is None else "[green]yes[/]" if o.matched else "[red]NO[/]"
        table.add_row(o.configuration, o.predicted, o.verdict, found, mark)
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
            "configurations": {
                name: {"settings": c.settings, "predicts": predicted_text(c)}
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
        for name, c in row["configurations"].items():
            settings = ", ".join(f"{k}={render_setting(v)}" for k, v in c["settings"].items())
            settings = settings or "as shipped"
            console.print(f"  {name}: {settings} -> {c['predicts']}", soft_wrap=True)
        console.print(f"  run: txnchaos repro {row['name']}", soft_wrap=True)
        console.print()
