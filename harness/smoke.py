"""The smoke workload behind ``txnchaos demo``: a local cluster (brokers and a
coordinator as separate processes), a transactional confluent-kafka producer that
commits most transactions and aborts some (after flushing, so aborted records do
reach the log), a read_committed consumer group reading everything back, and a
summary saying whether every committed record came back exactly once, in order,
and no aborted record was ever returned."""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from .launch.local import LocalCluster
from .workload.clients import position

TOPIC = "txnchaos-smoke"
RECORDS_PER_TXN = 10


@dataclass
class SmokeResult:
    transactions: int = 0
    committed: int = 0
    aborted: int = 0
    committed_records: int = 0
    consumed: int = 0
    duplicates: int = 0
    missing: int = 0
    aborted_read: int = 0
    out_of_order: int = 0
    produce_seconds: float = 0.0
    consume_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        anomalies = self.duplicates + self.missing + self.aborted_read + self.out_of_order
        return anomalies == 0 and not self.problems


def produce(bootstrap: str, transactions: int, seed: int, result: SmokeResult) -> set[str]:
    """Run the transactions; returns the values of committed transactions."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "smoke-writer"})
    producer.init_transactions(30)
    committed: set[str] = set()
    started = time.monotonic()
    for txn in range(transactions):
        values = [f"smoke|{txn}|{i}" for i in range(RECORDS_PER_TXN)]
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(TOPIC, value=value.encode(), key=str(i).encode())
        result.transactions += 1
        if rng.random() < 0.2:
            producer.flush(30)  # the aborted records reach the log, read_committed must skip them
            producer.abort_transaction(30)
            result.aborted += 1
        else:
            producer.commit_transaction(30)
            result.committed += 1
            committed.update(values)
    result.produce_seconds = time.monotonic() - started
    result.committed_records = len(committed)
    return committed


def consume(bootstrap: str, committed: set[str], result: SmokeResult) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txnchaos-smoke-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([TOPIC])
    seen: dict[int, list[str]] = {}
    started = time.monotonic()
    idle_deadline = time.monotonic() + 30
    try:
        while result.consumed < len(committed) and time.monotonic() < idle_deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                if msg.error():
                    result.problems.append(f"consumer error: {msg.error()}")
                    continue
                value = msg.value()
                seen.setdefault(position(msg)[1], []).append(value.decode() if value else "")
                result.consumed += 1
                idle_deadline = time.monotonic() + 30
    except KafkaException as exc:
        result.problems.append(f"consumer failed: {exc}")
    finally:
        consumer.close()
    result.consume_seconds = time.monotonic() - started
    everything = [v for values in seen.values() for v in values]
    result.duplicates = len(everything) - len(set(everything))
    result.aborted_read = len(set(everything) - committed)
    result.missing = len(committed - set(everything))
    for values in seen.values():
        # Within a partition, one writer's records come back in the order written.
        order = [(int(t), int(i)) for _, t, i in (v.split("|") for v in values)]
        if order != sorted(order):
            result.out_of_order += 1


def run_smoke(*, brokers: int, transactions: int, partitions: int, data_dir: Path | None) -> int:
    console = Console()
    temp = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="txnchaos-demo-")) if temp else data_dir
    assert root is not None
    result = SmokeResult()
    with console.status("starting a local cluster"):
        cluster = LocalCluster.prepare(root / "cluster", brokers, 1, [])
        cluster.up()
    bootstrap = cluster.state()["bootstrap"]
    console.print(
        f"cluster up: {brokers} broker(s) + 1 coordinator, bootstrap [bold]{bootstrap}[/]"
    )
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
            try:
                future.result(30)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        with console.status(f"running {transactions} transactions (about 1 in 5 aborted)"):
            committed = produce(bootstrap, transactions, seed=1, result=result)
        with console.status("reading them back with a read_committed consumer group"):
            consume(bootstrap, committed, result)
    finally:
        with console.status("stopping the cluster"):
            cluster.down()
        if temp:
            shutil.rmtree(root, ignore_errors=True)

    table = Table(title="txnchaos transactional smoke run")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("transactions", str(result.transactions))
    table.add_row("committed / aborted", f"{result.committed} / {result.aborted}")
    table.add_row("committed records", str(result.committed_records))
    table.add_row("read (read_committed)", str(result.consumed))
    table.add_row("aborted records read", str(result.aborted_read))
    table.add_row("duplicates", str(result.duplicates))
    table.add_row("missing (committed, never read)", str(result.missing))
    table.add_row("partitions out of order", str(result.out_of_order))
    rate = result.transactions / result.produce_seconds if result.produce_seconds else 0
    table.add_row("transaction rate", f"{rate:,.0f} transactions/s")
    console.print(table)
    for problem in result.problems:
        console.print(f"[red]problem:[/] {problem}")
    console.print("[bold green]verdict: valid[/]" if result.ok else "[bold red]verdict: INVALID[/]")
    return 0 if result.ok else 1
