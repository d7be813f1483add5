"""The smoke workload behind ``txnchaos demo``: a local cluster, an idempotent
confluent-kafka producer, a consumer group reading everything back, and a summary
that says whether every acknowledged record came back exactly once and in order."""

from __future__ import annotations

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

TOPIC = "txnchaos-smoke"


@dataclass
class SmokeResult:
    produced: int = 0
    acked: int = 0
    delivery_errors: int = 0
    consumed: int = 0
    duplicates: int = 0
    missing: int = 0
    out_of_order: int = 0
    produce_seconds: float = 0.0
    consume_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not (self.delivery_errors or self.duplicates or self.missing or self.out_of_order)
            and not self.problems
        )


def produce(bootstrap: str, records: int, result: SmokeResult) -> dict[int, list[int]]:
    """Produce ``records`` values; returns acknowledged values per partition in ack order."""
    acked: dict[int, list[int]] = {}
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            result.delivery_errors += 1
            return
        result.acked += 1
        acked.setdefault(msg.partition(), []).append(int(msg.value()))

    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(
                    TOPIC, key=str(i % 97).encode(), value=str(i).encode(), on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.05)
        result.produced += 1
        producer.poll(0)
    remaining = producer.flush(60)
    result.produce_seconds = time.monotonic() - started
    if remaining:
        result.problems.append(f"{remaining} records still unacknowledged after 60 s")
    return acked


def consume(bootstrap: str, expected: dict[int, list[int]], result: SmokeResult) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txnchaos-smoke-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    consumer.subscribe([TOPIC])
    want = sum(len(v) for v in expected.values())
    seen: dict[int, list[int]] = {}
    started = time.monotonic()
    idle_deadline = time.monotonic() + 30
    try:
        while result.consumed < want and time.monotonic() < idle_deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                if msg.error():
                    result.problems.append(f"consumer error: {msg.error()}")
                    continue
                seen.setdefault(msg.partition(), []).append(int(msg.value()))
                result.consumed += 1
                idle_deadline = time.monotonic() + 30
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        result.problems.append(f"consumer failed: {exc}")
    finally:
        consumer.close()
    result.consume_seconds = time.monotonic() - started
    for partition, values in expected.items():
        got = seen.get(partition, [])
        got_set = set(got)
        result.duplicates += len(got) - len(got_set)
        result.missing += len(set(values) - got_set)
        acked_set = set(values)
        in_log_order = [v for v in dict.fromkeys(got) if v in acked_set]
        if in_log_order != [v for v in values if v in got_set]:
            result.out_of_order += 1


def run_smoke(*, brokers: int, records: int, partitions: int, data_dir: Path | None) -> int:
    console = Console()
    temp = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="txnchaos-demo-")) if temp else data_dir
    assert root is not None
    result = SmokeResult()
    with console.status("starting a local cluster"):
        cluster = LocalCluster.prepare(root / "cluster", brokers, 0, [])
        cluster.up()
    bootstrap = cluster.state()["bootstrap"]
    console.print(f"cluster up: {brokers} broker(s), bootstrap [bold]{bootstrap}[/]")
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(TOPIC, partitions, 1)])
        for future in futures.values():
            try:
                future.result(30)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        with console.status(f"producing {records} records (idempotent, acks=all)"):
            acked = produce(bootstrap, records, result)
        with console.status("consuming them back with a consumer group"):
            consume(bootstrap, acked, result)
    finally:
        with console.status("stopping the cluster"):
            cluster.down()
        if temp:
            shutil.rmtree(root, ignore_errors=True)

    table = Table(title="txnchaos smoke run")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("records produced", str(result.produced))
    table.add_row("acknowledged", str(result.acked))
    table.add_row("delivery errors", str(result.delivery_errors))
    table.add_row("consumed", str(result.consumed))
    table.add_row("duplicates", str(result.duplicates))
    table.add_row("missing (acked, never read)", str(result.missing))
    table.add_row("partitions out of order", str(result.out_of_order))
    rate = result.acked / result.produce_seconds if result.produce_seconds else 0
    table.add_row("produce rate", f"{rate:,.0f} records/s")
    crate = result.consumed / result.consume_seconds if result.consume_seconds else 0
    table.add_row("consume rate", f"{crate:,.0f} records/s")
    console.print(table)
    for problem in result.problems:
        console.print(f"[red]problem:[/] {problem}")
    console.print("[bold green]verdict: valid[/]" if result.ok else "[bold red]verdict: INVALID[/]")
    return 0 if result.ok else 1
