"""Our cluster against Apache Kafka: same machine, same run, same client.

Both clusters run side by side, each 2 brokers and 1 coordinator-side node (ours: a
coordinator node; Apache Kafka: a KRaft controller, its transaction coordinators on the
brokers), both at their default transaction.version (2), no proxies. The phases alternate
between the clusters, ``--rounds`` times over, and each figure is the median of the
rounds, so both see the machine's load of the moment (an unmeasured warm-up phase on each
cluster first: its coordinators loaded, Kafka's JIT warm):

* committed transactions/s with 1 and with 8 transactional producers, and their commit
  latency p50/p99 (``bench/transactions.py``'s producer: 10 x 100 B records per
  transaction over the topic's 6 partitions, ``commit_transaction`` timed);
* idempotent produce records/s: one producer (acks=all, lz4, 100 B records) writing
  ``--records`` records to one partition, as ``bench/produce_consume.py``.

Each phase also reports the CPU the cluster's processes used per transaction (or per 1,000
records), from /proc: steadier than rates on a shared machine, and the AddPartitionsToTxn
requests the clients sent per transaction, with Kafka's CONCURRENT_TRANSACTIONS answers among
them (from the nodes' metrics): what explains a gap.

Clients. ``--clients librdkafka,java`` (the default: both): librdkafka through
confluent-kafka (``bench/transactions.py``'s worker) and the official Java client
(``bench/java_worker.py``: kafka-clients of the Java user kind's default release, one JVM per
producer). Every producer is created and initialised before the phase's clock starts (a
barrier: eight JVMs take seconds to start on a loaded machine), and a phase's rate is the
transactions committed in its ``--seconds`` window.

Run: .venv/bin/python bench/vs_kafka.py [--seconds 10] [--rounds 3] [--records 300000]
     [--kafka-version 4.4.0] [--clients librdkafka,java]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_worker import run_java
from proc_cpu import cpu_times  # bench/ is sys.path[0] as a script
from transactions import RECORD_BYTES, RECORDS_PER_TXN, TOPIC, run_producer

from txnchaos.harness.launch.kafka.cluster import KafkaCluster
from txnchaos.harness.launch.kafka.release import DEFAULT_VERSION
from txnchaos.harness.launch.local import LocalCluster

PARTITIONS = 6
PRODUCE_TOPIC = "bench-produce"
#: a producer's transactions: (bootstrap, transactional id, seconds, latencies, partitions,
#: ready) -> committed; ``ready()`` is called once the producer is initialised, the clock
#: starts after it
TxnWorker = Callable[[str, str, float, list[float], int, Callable[[], None]], int]


def _librdkafka(
    bootstrap: str,
    txn_id: str,
    seconds: float,
    latencies: list[float],
    partitions: int,
    ready: Callable[[], None],
) -> int:
    ready()  # a librdkafka producer initialises in milliseconds: inside its window
    return run_producer(bootstrap, txn_id, seconds, latencies, partitions)


def _java(
    bootstrap: str,
    txn_id: str,
    seconds: float,
    latencies: list[float],
    partitions: int,
    ready: Callable[[], None],
) -> int:
    return run_java(
        bootstrap,
        txn_id,
        seconds,
        latencies,
        partitions,
        topic=TOPIC,
        records=RECORDS_PER_TXN,
        record_bytes=RECORD_BYTES,
        ready=ready,
    )


#: the transactional producer of each client column
TXN_WORKERS: dict[str, TxnWorker] = {"librdkafka": _librdkafka, "java": _java}

_KAFKA_REQ = re.compile(
    r'^kafka_network_requestmetrics_requests_total\{request="AddPartitionsToTxn",'
    r'version="([0-3])"\} (\S+)$'
)
_KAFKA_BUSY = re.compile(
    r'^kafka_network_requestmetrics_errors_total\{error="CONCURRENT_TRANSACTIONS",'
    r'request="AddPartitionsToTxn"\} (\S+)$'
)


class Target:
    """One cluster under measurement: its bootstrap, the PIDs of its processes and its
    nodes' metrics endpoints."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        pids: list[int],
        stop: Callable[[], None],
        metrics: list[str],
    ):
        self.name = name
        self.bootstrap = bootstrap
        self.pids = pids
        self.stop = stop
        self.metrics = metrics

    def add_partitions(self) -> tuple[float, float]:
        """(AddPartitionsToTxn requests of clients (versions 0-3) served, of them answered
        CONCURRENT_TRANSACTIONS) so far, over Kafka's nodes (0, 0 for ours: its counter
        mixes in the brokers' verification requests)."""
        served = busy = 0.0
        for url in self.metrics:
            try:  # a JMX exporter at load 80 took over 10 s to answer
                text = urllib.request.urlopen(url, timeout=60).read().decode()
            except OSError:
                return float("nan"), float("nan")
            for line in text.splitlines():
                m = _KAFKA_REQ.match(line)
                if m:
                    served += float(m.group(2))
                m = _KAFKA_BUSY.match(line)
                if m:
                    busy += float(m.group(1))
        return served, busy

    def cpu(self) -> float:
        total = 0.0
        for pid in self.pids:
            times = cpu_times(pid)
            if times is None:
                raise SystemExit(f"cannot read /proc/{pid}/stat of {self.name}")
            total += sum(times)
        return total


def _urls(state: dict[str, Any]) -> list[str]:
    return [
        f"http://127.0.0.1:{n['metrics_port']}/metrics" for n in state["nodes"] if n["metrics_port"]
    ]


def start_ours(root: Path) -> Target:
    cluster = LocalCluster.prepare(root / "ours", 2, 1, [])
    cluster.up()
    state = cluster.state()
    pids = [n["pid"] for n in state["nodes"]]
    return Target("txnchaos", state["bootstrap"], pids, cluster.down, _urls(state))


def start_kafka(root: Path, version: str) -> Target:
    cluster = KafkaCluster.prepare(root / "kafka", version, 2, 1, [])
    cluster.up()
    state = cluster.state()
    pids = [n["pid"] for n in state["nodes"]]
    name = f"apache-kafka {version}"
    return Target(name, state["bootstrap"], pids, cluster.down, _urls(state))


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [NewTopic(TOPIC, PARTITIONS, 1), NewTopic(PRODUCE_TOPIC, 1, 1)]
    for f in admin.create_topics(wanted).values():
        f.result(60)


def transactions(
    target: Target, worker: TxnWorker, producers: int, seconds: float, label: str
) -> dict[str, float]:
    latencies: list[list[float]] = [[] for _ in range(producers)]
    counts = [0] * producers
    errors: list[BaseException] = []
    barrier = threading.Barrier(producers + 1)

    def ready() -> None:
        barrier.wait(300)

    def work(i: int) -> None:
        txn_id = f"vs-{label}-{producers}-{i}-{time.monotonic_ns()}"
        try:
            counts[i] = worker(
                target.bootstrap,
                txn_id,
                seconds,
                latencies[i],
                PARTITIONS,
                ready,
            )
        except BaseException as e:  # reported below; the others must not wait for it
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a worker failed: raised below
        barrier.wait(300)  # every producer initialised
    cpu0 = target.cpu()
    served0, busy0 = target.add_partitions()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"{target.name}, {label} x{producers}: {errors[0]!r}")
    merged = sorted(x for lat in latencies for x in lat)
    total = max(sum(counts), 1)
    served, busy = target.add_partitions()
    return {
        "rate": sum(counts) / seconds,
        "p50": statistics.median(merged) * 1000,
        "p99": merged[min(len(merged) - 1, int(len(merged) * 0.99))] * 1000,
        "cpu_ms": (target.cpu() - cpu0) * 1000 / total,
        "add_partitions": (served - served0) / total,
        "concurrent": (busy - busy0) / total,
    }


def produce(target: Target, records: int) -> dict[str, float]:
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = os.urandom(50).hex().encode()
    producer.produce(PRODUCE_TOPIC, payload, partition=0)  # connect, metadata, producer id
    assert producer.flush(60) == 0
    cpu0 = target.cpu()
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(PRODUCE_TOPIC, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(300):
        raise SystemExit(f"{target.name}: records not acknowledged in 300 s")
    elapsed = time.perf_counter() - started
    return {"rate": records / elapsed, "cpu_ms": (target.cpu() - cpu0) * 1e6 / records}


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    parser.add_argument("--clients", default="librdkafka,java")
    args = parser.parse_args()
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for c in clients:
        if c not in TXN_WORKERS:
            parser.error(
                f"--clients {c}: not a client here (one of {', '.join(sorted(TXN_WORKERS))})"
            )
    root = Path(tempfile.mkdtemp(prefix="txnchaos-bench-vs-kafka-"))
    targets: list[Target] = []
    try:
        targets.append(start_ours(root))  # one by one: a failed start still stops the other
        targets.append(start_kafka(root, args.kafka_version))
        for t in targets:
            create_topics(t.bootstrap)
        print(
            f"2 brokers + 1 coordinator/controller each, TV2, unproxied; {RECORDS_PER_TXN} x 100 B "
            f"per txn over {PARTITIONS} partitions; {os.cpu_count()} cores; "
            f"{args.rounds} rounds of {args.seconds:g} s phases; load {os.getloadavg()[0]:.1f}"
        )
        for t in targets:  # unmeasured: coordinators loaded, JIT warm, connections made
            transactions(t, TXN_WORKERS["librdkafka"], 8, args.seconds, "warm-up")
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for r in range(args.rounds):
            for client in clients:
                for producers in (1, 8):
                    for t in targets if r % 2 == 0 else reversed(targets):
                        row = transactions(
                            t, TXN_WORKERS[client], producers, args.seconds, f"{client}{r}"
                        )
                        results.setdefault((t.name, f"{client} txn x{producers}"), []).append(row)
            for t in targets if r % 2 == 0 else reversed(targets):
                results.setdefault((t.name, "produce"), []).append(produce(t, args.records))
            print(f"round {r + 1} done (load {os.getloadavg()[0]:.1f})", flush=True)
        print_table(results, targets, clients)
    finally:
        for t in targets:
            t.stop()
        shutil.rmtree(root, ignore_errors=True)


def print_table(
    results: dict[tuple[str, str], list[dict[str, float]]],
    targets: list[Target],
    clients: list[str],
) -> None:
    ours, kafka = targets[0].name, targets[1].name
    print(f"\n| measure | {ours} | {kafka} | ours / Kafka |")
    print("|---|---|---|---|")
    for client in clients:
        for producers in (1, 8):
            key = f"{client} txn x{producers}"
            a, b = results[(ours, key)], results[(kafka, key)]
            print(
                f"| {client}, {producers} producer(s): committed txn/s | {median(a, 'rate'):,.0f} "
                f"| {median(b, 'rate'):,.0f} | {median(a, 'rate') / median(b, 'rate'):.2f} |"
            )
            for q in ("p50", "p99"):
                print(
                    f"| {client}, {producers} producer(s): commit latency {q} (ms) | "
                    f"{median(a, q):.1f} | {median(b, q):.1f} | {median(a, q) / median(b, q):.2f} |"
                )
            print(
                f"| {client}, {producers} producer(s): cluster CPU ms per txn | "
                f"{median(a, 'cpu_ms'):.2f} | {median(b, 'cpu_ms'):.2f} | "
                f"{median(a, 'cpu_ms') / median(b, 'cpu_ms'):.2f} |"
            )
            print(
                f"| {client}, {producers} producer(s): clients' AddPartitionsToTxn per txn (of "
                f"them CONCURRENT_TRANSACTIONS) | — | "
                f"{median(b, 'add_partitions'):.2f} ({median(b, 'concurrent'):.2f}) | |"
            )
    a, b = results[(ours, "produce")], results[(kafka, "produce")]
    print(
        f"| idempotent produce records/s | {median(a, 'rate'):,.0f} | {median(b, 'rate'):,.0f} | "
        f"{median(a, 'rate') / median(b, 'rate'):.2f} |"
    )
    print(
        f"| idempotent produce: cluster CPU ms per 1,000 records | {median(a, 'cpu_ms'):.2f} | "
        f"{median(b, 'cpu_ms'):.2f} | {median(a, 'cpu_ms') / median(b, 'cpu_ms'):.2f} |"
    )
    print(f"(load now {os.getloadavg()[0]:.1f}; medians of the rounds)")


if __name__ == "__main__":
    main()
