"""The highest transactional load the harness drives on this machine: N locust
transactional-producer users, unpaced, against a local cluster (2 brokers + 1
coordinator) for a fixed time, spread over W locust worker processes (locust's distributed
mode, as ``txnchaos run --workers W`` runs them; W = 0: one local runner). Prints committed
transactions/s and records/s as the recorded history shows them, for 8 and 32 users (one run
each, same cluster).

Baseline, measured in the same run: as many bare confluent-kafka transactional producers
(threads in this process, no locust, no history) committing the same transactions (10
records over 2 of the topic's 6 partitions) for the same time. The ratio of the two rates
is what driving the load through the harness costs.

Target: the harness commits >= 80% of what the bare producers commit.

Run: .venv/bin/python bench/harness_load.py [--seconds S] [--workers W] [--users 8,32]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from proc_cpu import cpu_seconds  # bench/ is sys.path[0] when run as a script
from transactions import (
    add_node_cpus_option,
    placement,
    prepare_cluster,
    run_producer,
)

from txnchaos.harness.workload.web import read_master_port
from txnchaos.rundir.compact import compact_to_parquet

TARGET = 0.80


def workload(users: int) -> dict:
    return {
        "topics": [{"name": f"load-{users}", "partitions": 6}],
        "users": [
            {
                "kind": "transactional_producer",
                "name": "w",
                "count": users,
                "topics": [f"load-{users}"],
                "records_per_txn": 10,
                "partitions_per_txn": 2,
                "abort_probability": 0.0,
            }
        ],
    }


def _spawn(cmd: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_harness(bootstrap: str, run_dir: Path, seconds: float, workers: int) -> None:
    """The workload runner as ``txnchaos run`` starts it: one local process, or a master and
    ``workers`` worker processes (the master's port free, read back from its file)."""
    base = [sys.executable, "-m", "txnchaos.harness.workload.runner"]
    base += ["--config", str(run_dir / "workload.json"), "--bootstrap", bootstrap]
    base += ["--run-dir", str(run_dir), "--quiet"]
    lead = [*base, "--duration", str(seconds)]
    port_file = run_dir / "master.port"
    if workers:
        lead += ["--master", "--expect-workers", str(workers)]
        lead += ["--master-port", "0", "--master-port-file", str(port_file)]
    procs = [_spawn(lead)]
    if workers:
        while (port := read_master_port(port_file)) is None:
            if procs[0].poll() is not None:
                raise RuntimeError(f"the locust master exited with code {procs[0].returncode}")
            time.sleep(0.05)
        procs += [_spawn([*base, "--worker", "--master-port", str(port)]) for _ in range(workers)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"the harness's processes exited with codes {codes}")


def measure(
    bootstrap: str, users: int, seconds: float, root: Path, workers: int
) -> tuple[float, float, int]:
    run_dir = root / f"run-{users}"
    run_dir.mkdir()
    (run_dir / "workload.json").write_text(json.dumps(workload(users)))
    run_harness(bootstrap, run_dir, seconds, workers)
    compact_to_parquet(run_dir)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    h = pq.read_table(run_dir / "history.parquet", columns=["type", "outcome", "complete_ns"])
    commits = h.filter(pc.and_(pc.equal(h["type"], "commit"), pc.equal(h["outcome"], "ok")))
    sends = h.filter(pc.and_(pc.equal(h["type"], "send"), pc.equal(h["outcome"], "ok")))
    times = commits["complete_ns"].to_pylist()
    span = (max(times) - min(times)) / 1e9 if len(times) > 1 else seconds
    return len(times) / span, len(sends) / span, len(times)


def measure_bare(bootstrap: str, users: int, seconds: float) -> tuple[float, int]:
    """Committed transactions/s of ``users`` bare producers, timed like the harness's: commits
    over the span from the first to the last."""
    topic = f"bare-{users}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the topic exists
    for f in admin.create_topics([NewTopic(topic, 6, 1)]).values():
        f.result(30)
    done: list[list[float]] = [[] for _ in range(users)]
    threads = [
        threading.Thread(
            target=run_producer,
            args=(bootstrap, f"{topic}-{i}", seconds, [], 6),
            kwargs={"topic": topic, "spread": 2, "commit_times": done[i]},
        )
        for i in range(users)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = [x for d in done for x in d]
    span = max(times) - min(times) if len(times) > 1 else seconds
    return len(times) / span, len(times)


class CpuMeter:
    """CPU seconds spent while a measurement runs: by the client side (this process, or its
    waited-for children: the harness's processes) and by the cluster's nodes."""

    def __init__(self, node_pids: list[int]) -> None:
        self.node_pids = node_pids

    def _now(self) -> tuple[float, float, float]:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        nodes = sum(cpu_seconds(p) or 0.0 for p in self.node_pids)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, nodes

    def start(self) -> None:
        self._start = self._now()

    def client_and_nodes(self, children: bool) -> tuple[float, float]:
        me, kids, nodes = (b - a for a, b in zip(self._start, self._now(), strict=True))
        return (kids if children else me), nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--workers", type=int, default=2, help="locust worker processes (0: one local runner)"
    )
    parser.add_argument("--users", default="8,32", help="user counts, comma-separated")
    add_node_cpus_option(parser)
    args = parser.parse_args()
    try:
        user_counts = [int(u) for u in args.users.split(",")]
    except ValueError:
        parser.error(f"--users {args.users}: give counts such as 8,32")
    if args.workers < 0 or any(u < 1 for u in user_counts):
        parser.error("--workers must be >= 0 and every user count >= 1")
    root = Path(tempfile.mkdtemp(prefix="txnchaos-bench-load-"))
    cluster = prepare_cluster(parser, root / "cluster", [], args.node_cpus)
    cluster.up()
    try:
        bootstrap = cluster.state()["bootstrap"]
        print(
            "harness load: locust transactional producers, 10 records/txn, no aborts, "
            f"{args.workers} locust worker process(es); nodes on {placement(args.node_cpus)}"
        )
        meter = CpuMeter([n["pid"] for n in cluster.state()["nodes"] if n.get("pid")])
        for users in user_counts:
            meter.start()
            txns, records, n_harness = measure(bootstrap, users, args.seconds, root, args.workers)
            h_client, h_nodes = meter.client_and_nodes(children=True)
            meter.start()
            bare, n_bare = measure_bare(bootstrap, users, args.seconds)
            b_client, b_nodes = meter.client_and_nodes(children=False)
            ratio = txns / max(bare, 1e-9)
            verdict = "met" if ratio >= TARGET else "not met"
            print(
                f"{users} user(s): {txns:,.0f} committed transactions/s, {records:,.0f} records/s;"
                f" {users} bare producer(s): {bare:,.0f} transactions/s; harness at"
                f" {ratio:.0%} of bare (target {TARGET:.0%}: {verdict})"
            )
            per = 1000 / max(n_harness, 1), 1000 / max(n_bare, 1)
            print(
                f"  CPU ms per committed transaction: client harness {h_client * per[0]:.2f}"
                f" / bare {b_client * per[1]:.2f}; nodes {h_nodes * per[0]:.2f} /"
                f" {b_nodes * per[1]:.2f} (harness run {h_client:.1f} + {h_nodes:.1f} CPU-s,"
                f" bare {b_client:.1f} + {b_nodes:.1f})"
            )
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
