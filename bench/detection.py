"""The detection matrix: every reproduction in the catalogue (scenarios/repro/) x each
of its configurations x several seeds, one `txnchaos run` each. A cell is detected (the
bug configuration's predicted checkers flagged it), missed (they did not), a false
positive (a defended configuration judged invalid), valid (a defended configuration
judged valid) or a harness failure. Time to detect: from the workload's start to the
first flagged operation; wall: the run plus its verdict.

A configuration runs on the project's cluster or on the Apache Kafka release it names
(the "cluster" column): a reported bug on the release it affects, and on its fix release.

Goals (issue 23): every present bug detected on every seed, no false positive, median
run-plus-verdict under 60 s on a 2-core machine (issue 36: under 90 s on a release).

Run: .venv/bin/python bench/detection.py [--seeds 1,2,3] [--entries a,b]
     [--cluster all|txnchaos|apache-kafka] [--kafka-version V] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from txnchaos.harness.repro.catalogue import load_catalogue
from txnchaos.harness.repro.command import (
    ReproOptions,
    chosen,
    derived_scenario,
    matches,
    outcome_of,
    run_one,
    write_scenario,
)
from txnchaos.jobs.judging import run_judge
from txnchaos.jobs.options import DEFAULT_ENGINE


def first_flag_s(run_dir: Path, checkers: list[str]) -> float | None:
    """Seconds from the workload's start to the earliest example the predicted
    checkers report (their examples carry the operation's time)."""
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return None
    run = verdict.get("run") or {}
    start = run.get("workload_started_ns") or run.get("started_ns")
    times = [
        e["time_ns"]
        for name in checkers
        for e in (verdict.get("checkers", {}).get(name) or {}).get("examples") or []
        if isinstance(e, dict) and isinstance(e.get("time_ns"), int)
    ]
    if not times or not isinstance(start, int):
        return None
    return round((min(times) - start) / 1e9, 1)


def cell(expected: str, verdict: str, matched: bool) -> str:
    if verdict == "harness_failed":
        return "harness failed"
    if expected == "invalid":
        return "detected" if matched else "missed"
    return "valid" if verdict == "valid" else "FALSE POSITIVE"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    ap.add_argument("--entries", default=None, help="comma-separated catalogue names")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here")
    ap.add_argument(
        "--cluster",
        choices=["all", "txnchaos", "apache-kafka"],
        default="all",
        help="configurations on the project's cluster, on Apache Kafka releases, or both",
    )
    ap.add_argument("--kafka-version", default=None, help="only configurations on release V")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    entries = load_catalogue()
    if args.entries:
        entries = {n: entries[n] for n in args.entries.split(",")}
    out = args.out or Path(tempfile.mkdtemp(prefix="detection-"))
    judge = run_judge(DEFAULT_ENGINE, None, "txnchaos detection")  # one for every run
    rows: list[dict[str, Any]] = []
    picked = {}
    for name, entry in entries.items():
        if args.kafka_version is None and args.cluster != "all":
            configs = {
                n: c for n, c in entry.spec.configurations.items() if c.flavour == args.cluster
            }
        else:
            configs = chosen(entry, None, None, args.kafka_version)
        if configs:
            picked[name] = configs
    for name, configs in picked.items():
        entry = entries[name]
        for config_name, config in configs.items():
            for seed in seeds:
                base = out / name / config_name
                base.mkdir(parents=True, exist_ok=True)
                scenario_file = base / f"seed{seed}.yaml"
                write_scenario(derived_scenario(entry, config, seed, config_name), scenario_file)
                run_dir = base / f"seed{seed}"
                code, wall = run_one(scenario_file, run_dir, ReproOptions(out=base, judge=judge))
                verdict, anomalies = outcome_of(run_dir, code)
                matched = matches(config, verdict, anomalies)
                row = {
                    "entry": name,
                    "configuration": config_name,
                    "cluster": config.cluster_text,
                    "seed": seed,
                    "result": cell(config.expect.verdict, verdict, matched),
                    "found": sorted(anomalies),
                    "detect_s": first_flag_s(run_dir, config.expect.anomalies),
                    "wall_s": round(wall, 1),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    print()
    print(f"| entry | configuration | cluster | {' | '.join(f'seed {s}' for s in seeds)} |")
    print(f"|---|---|---|{'---|' * len(seeds)}")
    for name, configs in picked.items():
        for config_name, config in configs.items():
            cells = []
            for seed in seeds:
                r = next(
                    r
                    for r in rows
                    if (r["entry"], r["configuration"], r["seed"]) == (name, config_name, seed)
                )
                detect = f", {r['detect_s']}s to detect" if r["detect_s"] is not None else ""
                cells.append(f"{r['result']} ({r['wall_s']:.0f}s{detect})")
            print(f"| {name} | {config_name} | {config.cluster_text} | {' | '.join(cells)} |")
    bad = [r for r in rows if r["result"] in ("missed", "FALSE POSITIVE", "harness failed")]
    print()
    print(f"{len(rows)} runs: {len(bad)} missed / false positive / failed; runs kept in {out}")
    for kind, goal in (("txnchaos", 60), ("Apache Kafka", 90)):
        walls = [r["wall_s"] for r in rows if r["cluster"].startswith(kind)]
        if walls:
            print(
                f"  on {kind}: median run plus verdict {statistics.median(walls):.0f}s "
                f"(goal < {goal} s on an idle machine)"
            )


if __name__ == "__main__":
    main()
