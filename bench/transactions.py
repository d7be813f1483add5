"""Transactional throughput of a txnchaos cluster: librdkafka (confluent-kafka) and our
own asyncio producer (``harness/clients``), under transaction.version 0, 1 and 2.

Cluster: 2 brokers and 1 coordinator (separate processes). Each producer runs
transactions of 10 records of 100 bytes spread over the topic's partitions. Prints
transactions/s and commit latency p50/p99 for 1 and for 8 producers (librdkafka:
threads, the client releases the GIL while it waits; ours: tasks on one event loop).

Modes:

* default (no ``--client``): a comparison in one run on one cluster, for each producer
  count: librdkafka under TV0 (no verification), librdkafka under TV1 (the broker
  verifies each transaction's first write to a partition with the coordinator,
  AddPartitionsToTxn VerifyOnly), and our producer under TV2 (Produce v12 adds the
  partition, EndTxn v5 bumps the epoch). The cluster's transaction.version is changed
  between phases with UpdateFeatures (as ``txnchaos cluster features --set``), so every
  phase shares the cluster and the machine's load of the moment. Prints the ratios:
  ours TV2 / librdkafka TV0 and TV1 (target >= 1.5x for one producer) and librdkafka
  verified / unverified (target: verification costs <= 10%).
* ``--client ours|librdkafka|java`` [``--tv N``]: that client alone, each phase followed by a
  baseline; ``--tv`` first sets the cluster's transaction.version (default: leave it as
  started, 2 unless ``--set transaction.version=N``); our producer speaks the protocol of
  that level (the Java client, kafka-clients in a JVM per producer, picks TV2 itself
  where the level is 2: ``bench/java_worker.py``).

Baseline (``--client`` only): each phase is followed by the same number of idempotent,
non-transactional librdkafka producers that send the same 10 records and wait for them
(``flush``) in a loop: the Produce round trip every transaction also makes, with no
AddPartitionsToTxn, EndTxn or markers. The ratio of transactions/s to those rounds/s,
measured in one run, shows what the transaction protocol costs on top of the produce
path, whatever the machine's speed.

On a shared machine transactions/s is noisy, so each phase also reports the CPU the
node processes used per transaction (from ``/proc/PID/stat``; steadier than the
rate when other work competes for the cores), the load average, and the mean time
each node spent serving the hot APIs (from the nodes' ``txnchaos_request_seconds``
metric). ``--py-spy DIR`` records a py-spy flame graph (raw/collapsed stacks) of
every node per phase, if py-spy is installed (a dev tool, not a dependency).

Placement: by default the OS schedules the nodes and the client's threads over every
core. ``--node-cpus LIST`` places the three nodes on those CPUs (``cluster up --cpus``):
on a 2-core VM, ``--node-cpus 1`` keeps their messages to each other on one core and
leaves the other to the client, which lowers the CPU per transaction of both.

Run: .venv/bin/python bench/transactions.py [--seconds S] [--producers 1,8] [--node-cpus 1]
     [--client ours|librdkafka|java [--tv 0|1|2]]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from feature_switch import set_transaction_version  # bench/ is sys.path[0] as a script
from java_worker import run_java
from ours_worker import run_ours
from proc_cpu import cpu_times

from txnchaos.harness.launch.local import LaunchError, LocalCluster

RECORDS_PER_TXN = 10
RECORD_BYTES = 100
TOPIC = "bench-txn"
HOT_APIS = ("produce", "add_partitions_to_txn", "end_txn", "write_txn_markers")
_METRIC = re.compile(r'^txnchaos_(requests|request_seconds)_total\{api="(\w+)"\} (\S+)$')


def run_producer(
    bootstrap: str,
    txn_id: str,
    seconds: float,
    latencies: list[float],
    partitions: int,
    *,
    topic: str = TOPIC,
    spread: int | None = None,
    commit_times: list[float] | None = None,
) -> int:
    """Commit transactions of ``RECORDS_PER_TXN`` records until ``seconds`` pass; returns how
    many. A transaction's records go over ``spread`` consecutive partitions (default: all of
    the topic's ``partitions``), starting one further each time. Appends each commit's
    latency to ``latencies`` and, if given, its completion time to ``commit_times``."""
    spread = spread or partitions
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
            producer.produce(topic, payload, partition=(done + i % spread) % partitions)
        started = time.perf_counter()
        producer.commit_transaction(30)
        ended = time.perf_counter()
        latencies.append(ended - started)
        if commit_times is not None:
            commit_times.append(ended)
        done += 1
    return done


def run_plain_producer(
    bootstrap: str, name: str, seconds: float, latencies: list[float], partitions: int
) -> int:
    """The baseline: the same records as a transaction, idempotent, no transaction; each
    round waits for its acks (``flush``) as ``commit_transaction`` does."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    payload = os.urandom(RECORD_BYTES // 2).hex().encode()
    producer.produce(TOPIC, payload, partition=0)  # connect, metadata, producer id
    if producer.flush(30):
        raise SystemExit(f"baseline producer {name}: first record not acknowledged in 30 s")
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for i in range(RECORDS_PER_TXN):
            producer.produce(TOPIC, payload, partition=(done + i) % partitions)
        started = time.perf_counter()
        if producer.flush(30):
            raise SystemExit(f"baseline producer {name}: records not acknowledged in 30 s")
        latencies.append(time.perf_counter() - started)
        done += 1
    return done


Worker = Callable[[str, str, float, list[float], int], int]


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: int
    role: str
    pid: int
    metrics_port: int


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far (this bench needs Linux ``/proc``)."""
    times = cpu_times(pid)
    if times is None:
        raise SystemExit(f"cannot read /proc/{pid}/stat: bench/transactions.py needs Linux")
    return times


def request_totals(port: int) -> dict[str, tuple[float, float]]:
    """api -> (requests, seconds) from a node's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        m = _METRIC.match(line)
        if m:
            slot = out.setdefault(m.group(2), [0.0, 0.0])
            slot[0 if m.group(1) == "requests" else 1] = float(m.group(3))
    return {api: (v[0], v[1]) for api, v in out.items()}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def start_py_spy(nodes: list[NodeInfo], out_dir: Path, label: str) -> list[subprocess.Popen[bytes]]:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        print("py-spy not found; no profiles recorded")
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for n in nodes:
        target = out_dir / f"{label}-node{n.node_id}-{n.role.replace('+', '_')}.txt"
        cmd = [exe, "record", "--pid", str(n.pid), "--format", "raw", "--rate", "250"]
        cmd += ["--output", str(target), "--nonblocking"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def stop_py_spy(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(2)  # SIGINT: py-spy writes its output and exits
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def measure(
    bootstrap: str,
    producers: int,
    seconds: float,
    nodes: list[NodeInfo],
    py_spy: Path | None,
    partitions: int,
    worker: Worker = run_producer,
    label: str = "txn",
) -> dict[str, Any]:
    latencies: list[list[float]] = [[] for _ in range(producers)]
    counts = [0] * producers

    def work(i: int) -> None:
        txn_id = f"bench-{label}-{producers}-{i}"
        counts[i] = worker(bootstrap, txn_id, seconds, latencies[i], partitions)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(producers)]
    load_before = load_average()
    cpu_before = {n.node_id: cpu_seconds(n.pid) for n in nodes}
    client_before = sum(cpu_seconds(os.getpid()))
    req_before = {n.node_id: request_totals(n.metrics_port) for n in nodes}
    spies = start_py_spy(nodes, py_spy, f"p{producers}-{label}") if py_spy else []
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    stop_py_spy(spies)
    cpu: dict[int, tuple[float, float]] = {}
    for n in nodes:
        user, system = cpu_seconds(n.pid)
        cpu[n.node_id] = (user - cpu_before[n.node_id][0], system - cpu_before[n.node_id][1])
    served: dict[str, tuple[float, float]] = {}
    for n in nodes:
        after = request_totals(n.metrics_port)
        for api, (count, secs) in after.items():
            c0, s0 = req_before[n.node_id].get(api, (0.0, 0.0))
            prev = served.get(api, (0.0, 0.0))
            served[api] = (prev[0] + count - c0, prev[1] + secs - s0)
    merged = sorted(x for lat in latencies for x in lat)
    total = sum(counts)
    return {
        "rate": total / elapsed,
        "transactions": total,
        "p50": statistics.median(merged) * 1000,
        "p99": merged[min(len(merged) - 1, int(len(merged) * 0.99))] * 1000,
        "cpu": cpu,
        "served": served,
        "load": f"{load_before} -> {load_average()}",
        "client_cpu": sum(cpu_seconds(os.getpid())) - client_before,
    }


def report(producers: int, r: dict[str, Any], nodes: list[NodeInfo], title: str = "") -> None:
    total = max(r["transactions"], 1)
    print(
        f"{producers} producer(s){title}: {r['rate']:,.0f} transactions/s, "
        f"commit latency p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms "
        f"({r['transactions']} txns; load {r['load']})"
    )
    cpu = r["cpu"]
    parts = ", ".join(
        f"node {n.node_id} ({n.role}) {sum(cpu[n.node_id]) * 1e3 / total:.2f}"
        f" [sys {cpu[n.node_id][1] * 1e3 / total:.2f}]"
        for n in nodes
    )
    print(f"  node CPU ms/txn: {sum(map(sum, cpu.values())) * 1e3 / total:.2f} total; {parts}")
    print(f"  client (this process) CPU ms/txn: {r['client_cpu'] * 1e3 / total:.2f}")
    served = []
    others = []
    for api, (count, secs) in sorted(r["served"].items()):
        if api in HOT_APIS:
            served.append(f"{api} {count / total:.2f}/txn {secs / count * 1e3:.2f} ms")
        elif count:
            others.append(f"{api} {count:.0f}")
    print(f"  served (per txn, mean time in node): {'; '.join(served)}")
    if others:
        print(f"  other requests served: {', '.join(others)}")


def report_baseline(producers: int, txn: dict[str, Any], base: dict[str, Any]) -> None:
    total = max(base["transactions"], 1)
    node_cpu = sum(map(sum, base["cpu"].values())) * 1e3 / total
    print(
        f"  baseline, {producers} idempotent producer(s), the same records without a "
        f"transaction: {base['rate']:,.0f} rounds/s, round latency p50 {base['p50']:.1f} ms, "
        f"p99 {base['p99']:.1f} ms; node CPU {node_cpu:.2f} ms/round, client "
        f"{base['client_cpu'] * 1e3 / total:.2f}"
    )
    print(
        f"  transactions/s = {txn['rate'] / max(base['rate'], 1e-9):.1%} of baseline rounds/s"
        f" (load {base['load']})"
    )


def add_node_cpus_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--node-cpus",
        default=None,
        metavar="LIST",
        help="place the nodes on these CPUs, e.g. 1 (default: the OS places them)",
    )


def prepare_cluster(
    parser: argparse.ArgumentParser, root: Path, settings: list[str], node_cpus: str | None
) -> LocalCluster:
    """The benches' cluster (2 brokers, 1 coordinator) in ``root``, its nodes on ``node_cpus``;
    an unusable CPU list ends the bench with the parser's error."""
    try:
        return LocalCluster.prepare(root, 2, 1, settings, cpus=node_cpus)
    except LaunchError as exc:
        parser.error(str(exc))


def placement(node_cpus: str | None) -> str:
    return f"CPUs {node_cpus}" if node_cpus else "any CPU"


CLIENTS = ("ours", "librdkafka", "java")
COMPARISON = (("librdkafka", 0), ("librdkafka", 1), ("ours", 2))
"""The default mode's phases per producer count: (client, transaction.version)."""
OURS_TARGET = 1.5  # one TV2 producer of ours against one librdkafka producer
VERIFICATION_COST_TARGET = 0.10


def worker_for(client: str, tv: int | None) -> Worker:
    """The per-producer worker of ``client``; ours speaks the protocol of ``tv`` (None: the
    cluster's finalized level)."""
    if client == "librdkafka":
        return run_producer
    if client == "java":  # kafka-clients follows the cluster's finalized level itself
        return functools.partial(
            run_java, topic=TOPIC, records=RECORDS_PER_TXN, record_bytes=RECORD_BYTES
        )
    return functools.partial(
        run_ours,
        topic=TOPIC,
        records=RECORDS_PER_TXN,
        record_bytes=RECORD_BYTES,
        transaction_version=tv,
    )


@dataclass(frozen=True, slots=True)
class Bench:
    bootstrap: str
    addresses: list[str]
    nodes: list[NodeInfo]
    seconds: float
    partitions: int
    py_spy: Path | None

    def phase(self, producers: int, client: str, tv: int | None) -> dict[str, Any]:
        """One client's transactions at ``tv`` (switched on the running cluster first; None
        leaves the cluster's level as it is); prints its report."""
        if tv is not None:
            set_transaction_version(self.bootstrap, self.addresses, tv)
        label = f"{client}-tv{tv if tv is not None else 'as-started'}"
        r = measure(
            self.bootstrap,
            producers,
            self.seconds,
            self.nodes,
            self.py_spy,
            self.partitions,
            worker_for(client, tv),
            label,
        )
        level = f"TV{tv}" if tv is not None else "the cluster's transaction.version"
        report(producers, r, self.nodes, f", {client} {level}")
        return r


def ratio_line(name: str, value: float, target: str) -> str:
    return f"  {name}: {value:.2f} ({target})"


def compare(bench: Bench, producers: int) -> list[str]:
    """The default mode for one producer count; returns its ratio lines."""
    rates = {(c, tv): bench.phase(producers, c, tv)["rate"] for c, tv in COMPARISON}
    ours = rates[("ours", 2)]
    tv0 = max(rates[("librdkafka", 0)], 1e-9)
    tv1 = rates[("librdkafka", 1)]
    one = producers == 1
    mark = f"target >= {OURS_TARGET}" if one else "report only"
    cost_target = f"target <= {VERIFICATION_COST_TARGET:.0%}" if one else "report only"
    return [
        f"{producers} producer(s):",
        ratio_line("ours TV2 / librdkafka TV0 (txn/s)", ours / tv0, mark),
        ratio_line("ours TV2 / librdkafka TV1 (txn/s)", ours / max(tv1, 1e-9), mark),
        ratio_line(
            "librdkafka verified (TV1) / unverified (TV0)",
            tv1 / tv0,
            f"verification costs {1 - tv1 / tv0:.1%}; {cost_target}",
        ),
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per phase")
    parser.add_argument("--producers", default="1,8", help="comma-separated producer counts")
    parser.add_argument("--py-spy", type=Path, default=None, help="record node profiles here")
    parser.add_argument("--set", action="append", default=[], help="node setting KEY=VALUE")
    parser.add_argument(
        "--partitions",
        type=int,
        default=6,
        help="partitions of the topic; a transaction's 10 records are spread over all of them "
        "(up to 10): each is one more Produce request and one more marker per transaction",
    )
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default=None,
        help="measure this client alone (with a baseline after each phase); default: compare "
        "ours under TV2 with librdkafka under TV0 and TV1 on one cluster",
    )
    parser.add_argument(
        "--tv",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="with --client: set the cluster's transaction.version to N (UpdateFeatures) "
        "before measuring; our client then speaks that level's protocol",
    )
    add_node_cpus_option(parser)
    args = parser.parse_args()
    if not 1 <= args.partitions <= 1000:
        parser.error("--partitions must be between 1 and 1000")
    if args.tv is not None and args.client is None:
        parser.error("--tv needs --client (the default comparison sets the levels itself)")
    try:
        args.producer_counts = [int(x) for x in args.producers.split(",")]
    except ValueError:
        parser.error(f"--producers: expected counts such as 1,8, got {args.producers!r}")
    if not args.producer_counts or min(args.producer_counts) < 1:
        parser.error("--producers: every count must be at least 1")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    args.parser = parser
    return args


def main() -> None:
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="txnchaos-bench-txn-"))
    cluster = prepare_cluster(args.parser, root, list(args.set), args.node_cpus)
    cluster.up()
    try:
        state = cluster.state()
        bootstrap = state["bootstrap"]
        nodes = [NodeInfo(n["id"], n["role"], n["pid"], n["metrics_port"]) for n in state["nodes"]]
        addresses = [f"{n['host']}:{n['port']}" for n in state["nodes"]]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
            f.result(30)
        print(
            f"cluster: 2 brokers + 1 coordinator; {RECORDS_PER_TXN} x {RECORD_BYTES} B per txn "
            f"over {args.partitions} partitions; "
            f"{os.cpu_count()} cores; nodes on " + placement(args.node_cpus)
        )
        bench = Bench(bootstrap, addresses, nodes, args.seconds, args.partitions, args.py_spy)
        if args.client is None:
            summary: list[str] = []
            for producers in args.producer_counts:
                summary += compare(bench, producers)
            print(f"ratios measured in this run (load now {load_average()}):")
            print("\n".join(summary))
            return
        for producers in args.producer_counts:
            txn = bench.phase(producers, args.client, args.tv)
            base = measure(
                bootstrap, producers, args.seconds, nodes, None, args.partitions, run_plain_producer
            )
            report_baseline(producers, txn, base)
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
