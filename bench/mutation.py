"""Mutation analysis: how many small bugs nobody planted do the nightly mixes detect?

Each mutant (bench/mutants.py: one exact text replacement in one file of ``cluster/``) is
applied to a scratch copy of the cluster, and every scenario is run against it, one
`txnchaos run` at a time. The scratch tree is ``<out>/trees/<mutant>/txnchaos/`` with a
copy of ``cluster/`` and links to the other layers (``rundir/``, ``harness/``, ``analysis/``,
``jobs/``); it goes first on PYTHONPATH, ahead of the editable install (whose finder comes
after the path finder), so
the harness and every node process it starts import the mutated ``txnchaos.cluster`` (and
the harness and analysis of the checkout this script is in: run a copy of the checkout to
keep editing this one meanwhile). The unmutated baseline runs from such a tree as well. The
canary mutant, which every run must detect, shows the nodes run the copy.

A cell is ``detected`` (the run was judged invalid; the checkers that flagged it are
named), ``missed`` (judged valid), or ``harness error`` (the run itself failed: a node
that dies at once, a timeout). A mutant counts as detected when any scenario detects it.
``--baseline N`` also runs the unmutated cluster N times per scenario (the false-positive
rate). ``--stop-at-detection`` skips a mutant's remaining scenarios once one detects it
(the score is the same; the matrix then shows ``-`` for cells not run). Results are kept
per cell in ``<out>/cells/``; a cell already there is not run again (resume a long
measurement by re-running the same command).

Run: .venv/bin/python bench/mutation.py [--mutants a,b] [--scenarios f.yaml,...]
     [--seeds 1] [--out DIR] [--baseline N] [--stop-at-detection]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutants import BY_NAME, CANARY, CATEGORIES, MUTANTS, Mutant

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIOS = tuple(sorted((ROOT / "scenarios" / "nightly").glob("*.yaml")))
BASELINE = "none"
#: one run plus its verdict; generous: on a shared 2-core machine at load 100 runs took 230-340 s
RUN_TIMEOUT_S = 600


class MutantError(Exception):
    """A mutant that cannot be applied to this checkout."""


@dataclass
class Cell:
    mutant: str
    scenario: str
    seed: int
    result: str  # detected | missed | client crash | harness error | valid | FALSE POSITIVE
    checkers: list[str]
    kinds: list[str]
    exit_code: int
    wall_s: float
    run_dir: str


def apply_mutant(mutant: Mutant, cluster_src: Path, tree: Path) -> Path:
    """A scratch import root (``tree``) whose ``txnchaos.cluster`` is ``cluster_src`` with
    ``mutant`` applied; raises MutantError if its original text is not found exactly once."""
    target = cluster_src / mutant.file
    try:
        text = target.read_text()
    except OSError as exc:
        raise MutantError(
            f"mutant {mutant.name}: cannot read cluster/{mutant.file}: {exc}"
        ) from None
    found = text.count(mutant.original)
    if found != 1:
        raise MutantError(
            f"mutant {mutant.name}: its original text occurs {found} times in "
            f"cluster/{mutant.file} (must be exactly once: the code changed; update the mutant)"
        )
    build_tree(cluster_src, tree)
    (tree / "txnchaos" / "cluster" / mutant.file).write_text(
        text.replace(mutant.original, mutant.replacement)
    )
    return tree


def _other_layers() -> tuple[str, ...]:
    """The package's layers besides the cluster, as setup.py's LAYERS names them (read by
    scripts/layers.py, which the shell scripts use too)."""
    spec = importlib.util.spec_from_file_location("layers", ROOT / "scripts" / "layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(layer for layer in module.layers() if layer != "cluster")


def build_tree(cluster_src: Path, tree: Path) -> Path:
    """``tree/txnchaos/`` with a copy of the cluster and links to the other layers of this
    checkout (every one: a layer left out would be imported from wherever ``txnchaos`` is
    installed, which need not be this checkout)."""
    pkg = tree / "txnchaos"
    if tree.exists():
        shutil.rmtree(tree)
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    shutil.copytree(
        cluster_src, pkg / "cluster", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for layer in _other_layers():
        (pkg / layer).symlink_to(ROOT / layer, target_is_directory=True)
    return tree


def check_all(mutants: list[Mutant], cluster_src: Path) -> None:
    """Refuse the whole measurement up front if any mutant no longer applies."""
    problems = []
    for m in mutants:
        text = (cluster_src / m.file).read_text() if (cluster_src / m.file).exists() else ""
        n = text.count(m.original)
        if n != 1:
            problems.append(f"{m.name} (cluster/{m.file}: original text found {n} times)")
    if problems:
        raise MutantError("mutants that no longer apply: " + "; ".join(problems))


def judged(run_dir: Path) -> tuple[list[str], list[str]]:
    """The checkers (and anomaly kinds) that flagged the run, and ``node_error`` when an
    exception escaped a node's code (the verdict's findings)."""
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return [], []
    checkers, kinds = [], []
    for name, c in (verdict.get("checkers") or {}).items():
        if c.get("status") == "invalid" or (c.get("anomaly_count") or 0) > 0:
            checkers.append(name)
            kinds += [f"{name}.{k}" for k, n in (c.get("counts") or {}).items() if n]
    # an exception that escaped a node's code is the cluster's bug, seen by the run too
    errors = [f for f in verdict.get("findings") or [] if f.get("kind") == "node_error"]
    if errors:
        checkers.append("node_error")
        kinds += sorted(
            {f"node_error.{str(f.get('exception')).rsplit('.', 1)[-1]}" for f in errors}
        )
    return checkers, kinds


#: the findings that are a client library's failure, not the cluster's (analysis/findings.py):
#: a crash (librdkafka's assertion under the network mix) or a call that never returned
#: (librdkafka#5456 under the process mix); the bench counts both as a client crash
CLIENT_FAILURES = frozenset({"client_crash", "client_hang"})


def client_crashed(run_dir: Path) -> bool:
    """Whether the verdict records a workload client's crash or hang (a finding: the run
    exits 1 with every checker valid)."""
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return False
    return any(f.get("kind") in CLIENT_FAILURES for f in verdict.get("findings") or [])


def run_cell(mutant: str, tree: Path, scenario: Path, seed: int, out: Path, engine: str) -> Cell:
    run_dir = out / "runs" / mutant / f"{scenario.stem}-seed{seed}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    cmd = [
        sys.executable,
        "-m",
        "txnchaos.jobs.cli",
        "run",
        str(scenario),
        "--seed",
        str(seed),
        "--engine",
        engine,
        "--out",
        str(run_dir),
    ]
    log = run_dir.parent / f"{scenario.stem}-seed{seed}.log"
    started = time.monotonic()
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = proc.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            code = -1
    wall = time.monotonic() - started
    checkers, kinds = judged(run_dir)
    if code == 1 and checkers:
        result = "FALSE POSITIVE" if mutant == BASELINE else "detected"
    elif code == 0:
        result = "valid" if mutant == BASELINE else "missed"
    elif code == 1 and client_crashed(run_dir):
        result = "client crash"  # judged valid; a client library's bug is not the cluster's
    else:
        result = "harness error"
    return Cell(
        mutant, scenario.stem, seed, result, checkers, kinds, code, round(wall, 1), str(run_dir)
    )


def cell_path(out: Path, mutant: str, scenario: Path, seed: int) -> Path:
    return out / "cells" / mutant / f"{scenario.stem}-seed{seed}.json"


def short(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if cell.result == "detected":
        return "**" + ", ".join(cell.checkers) + "**"
    return cell.result


def markdown(
    mutants: list[Mutant], scenarios: list[Path], seeds: list[int], cells: dict[Any, Cell]
) -> str:
    cols = [f"{s.stem} s{seed}" for s in scenarios for seed in seeds]
    lines = [
        "| mutant | category | round | " + " | ".join(cols) + " |",
        "|---|---|---|" + "---|" * len(cols),
    ]
    for m in mutants:
        row = [short(cells.get((m.name, s.stem, seed))) for s in scenarios for seed in seeds]
        lines.append(f"| {m.name} | {m.category} | {m.round} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def score(mutants: list[Mutant], cells: dict[Any, Cell]) -> dict[str, Any]:
    detected = sorted(
        {c.mutant for c in cells.values() if c.result == "detected" and c.mutant != BASELINE}
    )
    names = [m.name for m in mutants]
    by_category: dict[str, list[int]] = {}
    by_round: dict[str, list[int]] = {}
    for m in mutants:
        hit = m.name in detected
        d, n = by_category.get(m.category, [0, 0])
        by_category[m.category] = [d + hit, n + 1]
        d, n = by_round.get(str(m.round), [0, 0])
        by_round[str(m.round)] = [d + hit, n + 1]
    base = [c for c in cells.values() if c.mutant == BASELINE]
    return {
        "mutants": len(names),
        "detected": len([n for n in names if n in detected]),
        "missed": [n for n in names if n not in detected],
        "by_category": {k: f"{d}/{n}" for k, (d, n) in by_category.items()},
        "by_round": {k: f"{d}/{n}" for k, (d, n) in sorted(by_round.items())},
        "baseline_runs": len(base),
        "false_positives": sum(c.result == "FALSE POSITIVE" for c in base),
        "baseline_harness_errors": sum(c.result == "harness error" for c in base),
        "baseline_client_crashes": sum(c.result == "client crash" for c in base),
        "max_wall_s": max((c.wall_s for c in cells.values()), default=0),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Mutants: " + ", ".join(m.name for m in MUTANTS),
    )
    ap.add_argument(
        "--mutants",
        default="all",
        help="comma-separated mutant names, all, round1 or round2 (one round's set), or none "
        "(with --baseline: false positives only)",
    )
    ap.add_argument(
        "--scenarios",
        default=",".join(str(p.relative_to(ROOT)) for p in DEFAULT_SCENARIOS),
        help="comma-separated scenario files (default: scenarios/nightly/*.yaml)",
    )
    ap.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    ap.add_argument("--out", type=Path, default=ROOT / "var" / "mutation", help="results here")
    ap.add_argument(
        "--baseline", type=int, default=0, help="also run the unmutated cluster on N seeds"
    )
    ap.add_argument("--baseline-seed-base", type=int, default=1, help="first baseline seed")
    ap.add_argument(
        "--stop-at-detection",
        action="store_true",
        help="skip a mutant's remaining scenarios once one detects it",
    )
    ap.add_argument("--no-canary", action="store_true", help="skip the canary mutant")
    ap.add_argument("--engine", default="reference", choices=("reference", "spark", "auto"))
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for m in (CANARY, *MUTANTS):
            print(f"{m.name:40} {m.category:17} r{m.round} cluster/{m.file}: {m.description}")
        return 0
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        print(f"mutation: --seeds must be integers: {args.seeds!r}", file=sys.stderr)
        return 2
    if args.mutants == "all":
        mutants = list(MUTANTS)
    elif args.mutants == "none":
        mutants = []  # the unmutated baseline only (--baseline N)
    elif args.mutants in ("round1", "round2"):
        mutants = [m for m in MUTANTS if m.round == int(args.mutants[-1])]
    else:
        unknown = [n for n in args.mutants.split(",") if n not in BY_NAME]
        if unknown:
            print(f"mutation: unknown mutant(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        mutants = [BY_NAME[n] for n in args.mutants.split(",")]
    scenarios = [Path(s) if Path(s).is_absolute() else ROOT / s for s in args.scenarios.split(",")]
    missing = [str(s) for s in scenarios if not s.is_file()]
    if missing:
        print(f"mutation: no such scenario file: {', '.join(missing)}", file=sys.stderr)
        return 2
    unknown_cat = [m.name for m in mutants if m.category not in CATEGORIES]
    if unknown_cat:
        print(f"mutation: mutants with unknown category: {unknown_cat}", file=sys.stderr)
        return 2
    cluster_src = ROOT / "cluster"
    plan = ([] if args.no_canary or not mutants else [CANARY]) + mutants
    try:
        check_all(plan, cluster_src)
    except MutantError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    cells: dict[Any, Cell] = {}

    def record(c: Cell) -> None:
        cells[(c.mutant, c.scenario, c.seed)] = c
        path = out / "cells" / c.mutant / f"{c.scenario}-seed{c.seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(c), indent=1))
        print(json.dumps(asdict(c)), flush=True)

    def cached(name: str, scenario: Path, seed: int) -> Cell | None:
        path = cell_path(out, name, scenario, seed)
        if path.exists():
            c = Cell(**json.loads(path.read_text()))
            cells[(name, scenario.stem, seed)] = c
            return c
        return None

    base_seeds = [args.baseline_seed_base + i for i in range(args.baseline)]
    base_tree: Path | None = None
    for seed in base_seeds:
        for scenario in scenarios:
            if cached(BASELINE, scenario, seed) is None:
                if base_tree is None:
                    base_tree = build_tree(cluster_src, out / "trees" / BASELINE)
                record(run_cell(BASELINE, base_tree, scenario, seed, out, args.engine))
    for mutant in plan:
        tree = None
        done = False
        for scenario in scenarios:
            for seed in seeds:
                if done and args.stop_at_detection:
                    continue
                c = cached(mutant.name, scenario, seed)
                if c is None:
                    if tree is None:
                        tree = apply_mutant(mutant, cluster_src, out / "trees" / mutant.name)
                    c = run_cell(mutant.name, tree, scenario, seed, out, args.engine)
                    record(c)
                done = done or c.result == "detected"
        if mutant is CANARY and not done:
            print(
                "mutation: the canary was not detected: the nodes may not run the mutated "
                "copy (see the runs under " + str(out / "runs" / CANARY.name) + ")",
                file=sys.stderr,
            )
            return 2
    table = markdown(mutants, scenarios, seeds, cells)
    summary = score(mutants, cells)
    lines = [
        table,
        "",
        f"Detected by at least one scenario: {summary['detected']} of {summary['mutants']}",
        "By category: " + ", ".join(f"{k} {v}" for k, v in summary["by_category"].items()),
        "By round (1: the first set; 2: written before the second round changed the mixes): "
        + ", ".join(f"round {k} {v}" for k, v in summary["by_round"].items()),
        "Missed: " + (", ".join(summary["missed"]) or "none"),
    ]
    if base_seeds:
        lines.append(
            f"Unmutated runs: {summary['baseline_runs']}, false positives "
            f"{summary['false_positives']}, harness errors {summary['baseline_harness_errors']}, "
            f"client crashes or hangs (findings, judged valid) "
            f"{summary['baseline_client_crashes']}"
        )
    lines.append(f"Longest run: {summary['max_wall_s']} s")
    text = "\n".join(lines)
    print()
    print(text)
    (out / "matrix.md").write_text(text + "\n")
    (out / "matrix.json").write_text(
        json.dumps(
            {
                "scenarios": [str(s) for s in scenarios],
                "seeds": seeds,
                "summary": summary,
                "cells": [asdict(c) for c in cells.values()],
            },
            indent=1,
        )
    )
    print(f"\nwrote {out / 'matrix.md'} and {out / 'matrix.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
