"""Analysis speed: generate synthetic histories of ~1M and ~10M events, run the whole pipeline
(Spark start included, in a fresh process per size), print seconds and events/s.

    .venv/bin/python bench/analysis.py [--sizes 1000000,10000000] [--master local[2]] [--keep DIR]

Not a timed test. The 10M history is ten disjoint copies of the 1M one (processes, topics and
values prefixed), so both are valid histories with the same shape. Target on 2 cores: the 10M
history judged in at most 60 s end to end.

Each line says whether its JVM mapped Spark's classes from the class-data-sharing archive
(``mapped``) or ran without one (``missing``: the first analysis on a machine, slower to start;
a background process then builds it, see analysis/spark/class_archive.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import repo_root  # noqa: F401  (makes txnchaos_testing importable)
from proc_cpu import cpu_seconds  # bench/ is sys.path[0] when run as a script

from txnchaos.rundir.run_dir import FINAL_STATE_JSON, METRICS_PARQUET, write_json
from txnchaos_testing.synthetic import Synth, SynthConfig, replicate, replicate_state

BASE = SynthConfig(
    seed=7,
    writers=24,
    txns_per_writer=2600,
    max_records_per_txn=6,
    partitions=12,
    consumers=4,
    poll_max=20,
    idempotent_sends=2000,
    step_ns=2_000_000,
)


def generate(root: Path, sizes: list[int]) -> dict[int, Path]:
    t = time.perf_counter()
    synth = Synth(BASE).build()
    base_dir = root / "base"
    synth.write(base_dir)
    base = pq.read_table(base_dir / "history.parquet")
    print(f"generated base history: {base.num_rows} events in {time.perf_counter() - t:.1f}s")
    out = {}
    for size in sizes:
        copies = max(1, round(size / base.num_rows))
        d = root / f"h{size}"
        synth.write(d, history=replicate(base, copies))
        write_json(d / FINAL_STATE_JSON, replicate_state(synth.final_state, copies))
        m = pq.read_table(d / METRICS_PARQUET)
        m = m.filter(pc.is_valid(m["topic"]))  # node-level metrics do not replicate
        parts = [
            m.set_column(
                m.schema.get_field_index("topic"),
                "topic",
                pc.binary_join_element_wise(pa.scalar(f"r{k}."), m["topic"], ""),
            )
            for k in range(copies)
        ]
        pq.write_table(pa.concat_tables(parts), d / METRICS_PARQUET)
        out[size] = d
    return out


def jvm_cpu_seconds() -> float | None:
    """CPU seconds (user + system) the local Spark JVM has used so far: unlike wall time, this
    barely moves when other work shares the machine."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None or not (spark.sparkContext.master or "").startswith("local"):
        return None
    return cpu_seconds(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]


def run_one(run_dir: Path, master: str | None) -> None:
    from txnchaos.analysis.spark import class_archive
    from txnchaos.analysis.spark.pipeline import analyze

    t = time.perf_counter()
    v = analyze(run_dir, master)
    total = time.perf_counter() - t
    jvm_cpu = jvm_cpu_seconds()
    events = v.stats["events"]
    print(
        json.dumps(
            {
                "events": events,
                "seconds": round(total, 2),
                "events_per_s": round(events / total),
                "status": v.status,
                "jvm_cpu_s": None if jvm_cpu is None else round(jvm_cpu, 1),
                "class_archive": class_archive.mode(),
                "timings": {k: round(x, 2) for k, x in v.timings.items()},
            }
        ),
        flush=True,
    )
    end_jvm()


def end_jvm() -> None:
    """Stop Spark and wait for its JVM to exit: left to its shutdown hooks, it would still be
    running (~0.6 s here) while the next size's process starts."""
    from pyspark import SparkContext

    from txnchaos.analysis.spark import class_archive

    class_archive.end_jvm(getattr(SparkContext._gateway, "proc", None), timeout_s=120)


def parse_sizes(text: str) -> list[int]:
    """``--sizes``: positive event counts, comma-separated."""
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected counts such as 1000000,10000000"
        ) from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be a positive count")
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Generate synthetic histories and time the whole analysis of each, Spark "
        "start included, in a fresh process per size (target on 2 cores: 10M events in <= 60 s)."
    )
    ap.add_argument(
        "--sizes",
        default=[1_000_000, 10_000_000],
        type=parse_sizes,
        help="comma-separated target event counts, each rounded to whole copies of the "
        "~1.49M-event base history (default: 1000000,10000000)",
    )
    ap.add_argument(
        "--master", default=None, help="Spark master URL (default: local[2], as txnchaos analyze)"
    )
    ap.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="generate into DIR and keep it (default: a temporary directory)",
    )
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        run_one(Path(args.one), args.master)
        return
    sizes: list[int] = args.sizes
    root = Path(args.keep or tempfile.mkdtemp(prefix="txnchaos-bench-"))
    dirs = generate(root, sizes)
    for size, d in dirs.items():
        cmd = [sys.executable, __file__, "--one", str(d)]
        if args.master:
            cmd += ["--master", args.master]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        line = next((x for x in res.stdout.splitlines() if x.startswith("{")), None)
        if line is None:
            print(f"size {size}: failed\n{res.stderr[-3000:]}")
            continue
        r = json.loads(line)
        print(
            f"{size:>10} target -> {r['events']:>10} events: {r['seconds']:7.2f} s end to end "
            f"(Spark start included), {r['events_per_s']:>9} events/s, verdict {r['status']}, "
            f"Spark JVM CPU {r['jvm_cpu_s']} s, class archive {r['class_archive']}, "
            f"load {os.getloadavg()[0]:.1f}, {r['timings']}"
        )


if __name__ == "__main__":
    main()
