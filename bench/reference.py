"""The reference engine against the Spark pipeline: wall seconds of the whole command
``txnchaos analyze RUN_DIR --engine reference|spark`` (a fresh process each: start-up, Spark's
JVM, verdict.json and report.html included) on synthetic histories of ~1k to ~300k events.

    .venv/bin/python bench/reference.py [--sizes 1000,10000,100000,300000] [--no-spark]

Not a timed test: it says up to which history size ``--engine auto`` picks the reference
(``analysis/analyze.py`` REFERENCE_MAX_ROWS).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import repo_root  # noqa: F401  (makes txnchaos_testing importable)

from txnchaos_testing.synthetic import Synth, SynthConfig

BASE = SynthConfig(seed=11, writers=6, partitions=6, consumers=3, poll_max=10, txns_per_writer=10)


def generate(root: Path, size: int) -> Path:
    """A synthetic run directory of about ``size`` events (history rows)."""
    probe = Synth(BASE).build().history_table().num_rows
    txns = max(1, round(BASE.txns_per_writer * size / probe))
    synth = Synth(replace(BASE, txns_per_writer=txns, idempotent_sends=txns)).build()
    return synth.write(root / f"h{size}")


def time_command(run_dir: Path, engine: str) -> dict[str, float]:
    """``txnchaos analyze RUN_DIR --engine ENGINE`` in a fresh process: wall seconds from its
    start to its exit (verdict.json and report.html written; Spark's JVM start included)."""
    cmd = [sys.executable, "-m", "txnchaos.jobs.cli", "analyze", str(run_dir)]
    t = time.perf_counter()
    res = subprocess.run([*cmd, "--engine", engine], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if res.returncode not in (0, 1):
        raise RuntimeError(f"{engine} analysis failed:\n{res.stderr[-3000:]}")
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["engine"] == engine, verdict["engine"]
    return {f"{engine}_s": round(wall, 2), f"{engine}_status": verdict["status"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000,300000")
    ap.add_argument("--no-spark", action="store_true", help="time the reference only")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="txnchaos-reference-"))
    for size in (int(x) for x in args.sizes.split(",")):
        d = generate(root, size)
        events = pq.read_metadata(d / "history.parquet").num_rows
        r: dict[str, object] = {"target": size, "events": events, **time_command(d, "reference")}
        if not args.no_spark:
            r.update(time_command(d, "spark"))
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
