"""Running a catalogue entry's scenario, as changed by a test, into an invalid run to shrink."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from txnchaos.harness.repro.catalogue import SHIPPED
from txnchaos.rundir.verdict_file import anomalies_by_checker


def entry_scenario(entry: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The entry's scenario file as data, under ``settings`` (its bug configuration), with
    no prediction of its own beyond "invalid"."""
    data: dict[str, Any] = yaml.safe_load((SHIPPED / f"{entry}.yaml").read_text())
    data.pop("repro")
    data["expect"] = {"verdict": "invalid"}
    data["cluster"]["settings"] = {**(data["cluster"].get("settings") or {}), **settings}
    return data


def verdict_of(run_dir: Path) -> dict[str, Any]:
    verdict: dict[str, Any] = json.loads((run_dir / "verdict.json").read_text())
    return verdict


def invalid_run(scenario: dict[str, Any], tmp_path: Path) -> tuple[Path, set[str]]:
    """Runs ``scenario`` (`txnchaos run`, a subprocess) and returns the run directory and
    the checkers that flagged it; asserts it was invalid."""
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    run_dir = tmp_path / "run"
    # the plain rules judge these short runs: the shrinker's search, not the engine, is
    # tested (the nightly and catalogue runs in the suite are judged by PySpark)
    command = ["run", str(path), "--out", str(run_dir), "--engine", "reference"]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    return run_dir, set(anomalies_by_checker(verdict_of(run_dir)))


def attempt_of(run_dir: Path, shrunk: dict[str, Any]) -> Path:
    """The re-run directory of the attempt that ran exactly the shrunk scenario (the
    written file adds only its name and its expectation)."""
    wanted = {k: v for k, v in shrunk.items() if k not in ("name", "expect")}
    for scenario_file in sorted((run_dir / "shrink").glob("attempt-*.yaml")):
        tried = yaml.safe_load(scenario_file.read_text())
        if {k: v for k, v in tried.items() if k not in ("name", "expect")} == wanted:
            return scenario_file.with_suffix("")
    raise AssertionError(f"no attempt in {run_dir / 'shrink'} ran the shrunk scenario")
