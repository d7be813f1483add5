"""The highest transactional load the harness drives on this machine: N locust
transactional-producer users, unpaced, against a local cluster (2 brokers + 1
coordinator) for a fixed time. Prints committed transactions/s and records/s as the
recorded history shows them, for 1, 4 and 8 users (one run each, same cluster).

Baseline, measured in the same run: as many bare confluent-kafka transactional producers
(threads in this process, no locust, no history) committing the same transactions (10
records over 2 of the topic's 6 partitions) for the same time. The ratio of the two rates
is what driving the load through the harness costs.

Run: .venv/bin/python bench/harness_load.py [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from transactions import (  # bench/ is sys.path[0] when run as a script
    add_node_cpus_option,
    placement,
    prepare_cluster,
    run_producer,
)

from txnchaos.harness.history.compact import compact_to_parquet


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


def measure(bootstrap: str, users: int, seconds: float, root: Path) -> tuple[float, float]:
    run_dir = root / f"run-{users}"
    run_dir.mkdir()
    config = run_dir / "workload.json"
    config.write_text(json.dumps(workload(users)))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "txnchaos.harness.workload.runner",
            "--config",
            str(config),
            "--bootstrap",
            bootstrap,
            "--run-dir",
            str(run_dir),
            "--duration",
            str(seconds),
            "--quiet",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    compact_to_parquet(run_dir)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    h = pq.read_table(run_dir / "history.parquet", columns=["type", "outcome", "complete_ns"])
    commits = h.filter(pc.and_(pc.equal(h["type"], "commit"), pc.equal(h["outcome"], "ok")))
    sends = h.filter(pc.and_(pc.equal(h["type"], "send"), pc.equal(h["outcome"], "ok")))
    times = commits["complete_ns"].to_pylist()
    span = (max(times) - min(times)) / 1e9 if len(times) > 1 else seconds
    return len(times) / span, len(sends) / span


def measure_bare(bootstrap: str, users: int, seconds: float) -> float:
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
    return len(times) / span


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    add_node_cpus_option(parser)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="txnchaos-bench-load-"))
    cluster = prepare_cluster(parser, root / "cluster", [], args.node_cpus)
    cluster.up()
    try:
        bootstrap = cluster.state()["bootstrap"]
        print(
            "harness load: locust transactional producers, 10 records/txn, no aborts; nodes on "
            + placement(args.node_cpus)
        )
        for users in (1, 4, 8):
            txns, records = measure(bootstrap, users, args.seconds, root)
            bare = measure_bare(bootstrap, users, args.seconds)
            print(
                f"{users} user(s): {txns:,.0f} committed transactions/s, {records:,.0f} records/s;"
                f" {users} bare producer(s): {bare:,.0f} transactions/s; harness at"
                f" {txns / max(bare, 1e-9):.0%} of bare"
            )
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
