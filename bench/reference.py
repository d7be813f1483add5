"""Reference checkers against the Spark pipeline on small histories: seconds to judge synthetic
histories of ~1k, ~10k and ~100k events with ``analysis.reference.judge`` (Parquet read
included, one process) and with the Spark pipeline (``analyze``, in a fresh process per size:
Spark start included, and without it).

    .venv/bin/python bench/reference.py [--sizes 1000,10000,100000] [--no-spark]

Not a timed test: it says where the reference is the faster judge of a small history.
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

from txnchaos.analysis.reference import judge
from txnchaos_testing.synthetic import Synth, SynthConfig

BASE = SynthConfig(seed=11, writers=6, partitions=6, consumers=3, poll_max=10, txns_per_writer=10)


def generate(root: Path, size: int) -> Path:
    """A synthetic run directory of about ``size`` events (history rows)."""
    probe = Synth(BASE).build().history_table().num_rows
    txns = max(1, round(BASE.txns_per_writer * size / probe))
    synth = Synth(replace(BASE, txns_per_writer=txns, idempotent_sends=txns)).build()
    return synth.write(root / f"h{size}")


def time_reference(run_dir: Path) -> dict[str, float]:
    t = time.perf_counter()
    judged = judge(run_dir)
    total = time.perf_counter() - t
    anomalies = sum(sum(j.counts.values()) for j in judged.values())
    return {"reference_s": round(total, 3), "anomalies": anomalies}


def time_spark(run_dir: Path) -> dict[str, float]:
    """The pipeline in a fresh process (its JVM started for it)."""
    code = (
        "import json, sys\n"
        "from txnchaos.analysis.pipeline import analyze\n"
        "v = analyze(sys.argv[1], write=False)\n"
        "print(json.dumps({'total_s': v.timings['total_s'],"
        " 'spark_start_s': v.timings['spark_start_s']}))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, check=False
    )
    line = next((x for x in res.stdout.splitlines() if x.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"spark analysis failed:\n{res.stderr[-3000:]}")
    r = json.loads(line)
    return {
        "spark_s": round(r["total_s"], 2),
        "spark_without_start_s": round(r["total_s"] - r["spark_start_s"], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--no-spark", action="store_true", help="time the reference only")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="txnchaos-reference-"))
    for size in (int(x) for x in args.sizes.split(",")):
        d = generate(root, size)
        events = pq.read_metadata(d / "history.parquet").num_rows
        r: dict[str, object] = {"target": size, "events": events, **time_reference(d)}
        if not args.no_spark:
            r.update(time_spark(d))
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
