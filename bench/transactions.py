"""Transactional throughput of a txnchaos cluster with confluent-kafka producers.

Cluster: 2 brokers and 1 coordinator (separate processes). Each producer runs
transactions of 10 records of 100 bytes spread over the topic's partitions. Prints
transactions/s and commit latency p50/p99 for 1 and for 8 producers (threads; the
client releases the GIL while it waits).

Run: .venv/bin/python bench/transactions.py [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from txnchaos.harness.launch.local import LocalCluster

RECORDS_PER_TXN = 10
RECORD_BYTES = 100


def run_producer(bootstrap: str, txn_id: str, seconds: float, latencies: list[float]) -> int:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0}
    )
    producer.init_transactions(30)
    payload = os.urandom(RECORD_BYTES // 2).hex().encode()
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.begin_transaction()
        for i in range(RECORDS_PER_TXN):
            producer.produce("bench-txn", payload, partition=(done + i) % 6)
        started = time.perf_counter()
        producer.commit_transaction(30)
        latencies.append(time.perf_counter() - started)
        done += 1
    return done


def measure(bootstrap: str, producers: int, seconds: float) -> tuple[float, float, float]:
    latencies: list[list[float]] = [[] for _ in range(producers)]
    counts = [0] * producers

    def work(i: int) -> None:
        counts[i] = run_producer(bootstrap, f"bench-{producers}-{i}", seconds, latencies[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(producers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    merged = sorted(x for lat in latencies for x in lat)
    p50 = statistics.median(merged)
    p99 = merged[min(len(merged) - 1, int(len(merged) * 0.99))]
    return sum(counts) / elapsed, p50 * 1000, p99 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="txnchaos-bench-txn-"))
    cluster = LocalCluster.prepare(root, 2, 1, [])
    cluster.up()
    try:
        bootstrap = cluster.state()["bootstrap"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("bench-txn", 6, 1)]).values():
            f.result(30)
        print(f"cluster: 2 brokers + 1 coordinator; {RECORDS_PER_TXN} x {RECORD_BYTES} B per txn")
        for producers in (1, 8):
            rate, p50, p99 = measure(bootstrap, producers, args.seconds)
            print(
                f"{producers} producer(s): {rate:,.0f} transactions/s, "
                f"commit latency p50 {p50:.1f} ms, p99 {p99:.1f} ms"
            )
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
