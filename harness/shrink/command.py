"""Shrinking an invalid run: read its scenario (scenario.yaml), seed and schedule
(schedule.json, random faults included, as explicit actions), check that the anomaly
comes back on a re-run, reduce, and write ``shrunk.yaml`` into the run directory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from ...rundir.verdict_file import anomalies_by_checker
from ..console import make_console
from ..run.judge import Judge
from ..run.scenario import ScenarioError, load_scenario
from .attempts import Attempts
from .search import BudgetSpent, Scenario, Search, size_of, with_actions

SHRUNK_FILE = "shrunk.yaml"
EXIT_SHRUNK, EXIT_NOT_REPRODUCED = 0, 1


class ShrinkError(ValueError):
    """A run directory that cannot be shrunk (valid, unreadable, no scenario): exit 2."""


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ShrinkError(f"{path}: cannot read it ({exc})") from None


def original(run_dir: Path, scenario_file: Path | None) -> tuple[Scenario, set[str]]:
    """(the run as a scenario with its schedule made explicit, the checkers it flagged)."""
    if not run_dir.is_dir():
        raise ShrinkError(f"{run_dir}: not a run directory")
    verdict = _json(run_dir / "verdict.json")
    if not isinstance(verdict, dict) or verdict.get("status") != "invalid":
        raise ShrinkError(f"{run_dir} is not an invalid run: nothing to shrink")
    flagged = set(anomalies_by_checker(verdict))
    source = scenario_file or run_dir / "scenario.yaml"
    if not source.is_file():
        raise ShrinkError(
            f"{run_dir} has no scenario.yaml (a run recorded before it was kept): give the "
            "scenario file with --scenario FILE"
        )
    try:
        load_scenario(source)  # valid, or a clear error
    except ScenarioError as exc:
        raise ShrinkError(str(exc)) from exc
    data = yaml.safe_load(source.read_text())
    run = _json(run_dir / "run.json")
    schedule = _json(run_dir / "schedule.json")
    if not isinstance(schedule, list):
        raise ShrinkError(f"{run_dir / 'schedule.json'}: not a list of faults")
    actions = [_action(f) for f in schedule]
    data = with_actions(data, actions)
    if isinstance(run, dict) and isinstance(run.get("seed"), int):
        data["seed"] = run["seed"]
    data.pop("expect", None)
    return data, flagged


def _action(fault: dict[str, Any]) -> dict[str, Any]:
    """A scheduled fault as an explicit scenario action."""
    action: dict[str, Any] = {"at": fault["at"], "kind": fault["kind"]}
    if fault.get("duration"):
        action["duration"] = fault["duration"]
    for key in ("node", "client"):
        if fault.get(key) is not None:
            action[key] = fault[key]
    if fault.get("rule"):
        action["rule"] = fault["rule"]
    return action


def describe(s: Scenario) -> str:
    size = size_of(s)
    return f"{size.faults} fault(s), {size.duration:g}s of workload, {size.users} user(s)"


@dataclass(frozen=True)
class ShrinkResult:
    """What a shrink did: the re-runs it took and, when the anomaly came back, the minimal
    scenario it wrote (``scenario``) and the sizes before and after."""

    reruns: int
    before: str
    scenario: Path | None = None  # shrunk.yaml; None: the anomaly did not come back
    after: str | None = None
    smaller: bool = False

    @property
    def exit_code(self) -> int:
        return EXIT_SHRUNK if self.scenario is not None else EXIT_NOT_REPRODUCED


def main_shrink(
    run_dir: Path,
    budget_s: float,
    anomalies: list[str],
    scenario_file: Path | None,
    judge: Judge,
    console: Console | None = None,
) -> int:
    return shrink_run(run_dir, budget_s, judge, anomalies, scenario_file, console).exit_code


def shrink_run(
    run_dir: Path,
    budget_s: float,
    judge: Judge,
    anomalies: list[str] | None = None,
    scenario_file: Path | None = None,
    console: Console | None = None,
) -> ShrinkResult:
    """Shrink ``run_dir`` within ``budget_s``, each re-run judged by ``judge`` (raises
    :class:`ShrinkError` for a run that cannot be: valid, unreadable, no scenario, shrunk
    before)."""
    console = console or make_console()
    base, flagged = original(run_dir, scenario_file)
    target = set(anomalies) if anomalies else flagged - {"metrics"} or flagged
    unknown = target - flagged
    if unknown:
        raise ShrinkError(
            f"--anomaly {', '.join(sorted(unknown))}: the run's checkers that found anomalies "
            f"are {', '.join(sorted(flagged))}"
        )
    directory = run_dir / "shrink"
    if directory.exists() and any(directory.iterdir()):
        raise ShrinkError(f"{directory} exists: this run was shrunk before (remove it to redo)")
    directory.mkdir(parents=True, exist_ok=True)
    console.print(
        f"shrinking {run_dir} (seed {base.get('seed')}): {describe(base)}; the anomaly "
        f"class: {', '.join(sorted(target))}; budget {budget_s / 60:g} min"
    )
    attempts = Attempts(directory, target, budget_s, judge, log=console.print)
    try:
        reproduced = attempts.fails(base)
    except BudgetSpent:
        reproduced = False
    if not reproduced:
        console.print(
            "[red]the anomaly did not come back on a re-run with the same seed and faults: "
            "it depends on timing this machine did not repeat; nothing shrunk[/]"
        )
        return ShrinkResult(reruns=attempts.count, before=describe(base))
    search = Search(attempts.fails, log=lambda m: console.print(f"    -> {m}"))
    search.tried[json.dumps(base, sort_keys=True)] = True
    shrunk = search.shrink(base)
    smaller = size_of(shrunk).smaller_than(size_of(base))
    out = run_dir / SHRUNK_FILE
    header = (
        f"# shrunk from {run_dir} by `txnchaos shrink` in {attempts.count} re-runs:\n"
        f"# {describe(base)} -> {describe(shrunk)}\n"
        f"# still flagged by: {', '.join(sorted(target))} (seed {shrunk.get('seed')})\n"
        f"# run it: txnchaos run {out}\n"
    )
    shrunk = {**shrunk, "name": f"{shrunk.get('name', 'run')}-shrunk"}
    shrunk["expect"] = {"verdict": "invalid", "anomalies": sorted(target)}
    out.write_text(header + yaml.safe_dump(shrunk, sort_keys=False))
    console.print(
        f"{'shrunk' if smaller else 'nothing smaller still fails'}: {describe(base)} -> "
        f"{describe(shrunk)} in {attempts.count} re-runs; wrote {out}"
    )
    return ShrinkResult(attempts.count, describe(base), out, describe(shrunk), smaller)
