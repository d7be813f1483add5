"""The smoke run behind ``txnchaos demo``: a local cluster (brokers and a coordinator as
separate processes), a transactional producer that commits most transactions and aborts
some (after flushing, so aborted records do reach the log), a read_committed consumer
group reading everything back and the final read of every partition, all recorded as a
run directory in the history schema (``record_run``); ``txnchaos demo`` then judges it
(jobs/demo.py)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from rich.table import Table

from ..rundir.run_dir import write_run_info
from ..rundir.schema import EventType, encode_value
from ..rundir.writer import HistoryWriter
from .capture.final_state import capture_final_state
from .console import make_console
from .launch.local import LocalCluster
from .workload.clients import ConsumerClient, ProducerClient
from .workload.final_read import final_read

TOPIC = "txnchaos-smoke"
RECORDS_PER_TXN = 10
WRITER = "writer"
CONSUMER = "consumer"
TIMEOUT_S = 30.0


@dataclass
class SmokeResult:
    """What the workload did (the judgement comes from the checkers, not from here)."""

    transactions: int = 0
    committed: int = 0
    aborted: int = 0
    committed_records: int = 0
    consumed: int = 0
    produce_seconds: float = 0.0
    consume_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def produce(
    run_dir: Path,
    bootstrap: str,
    transactions: int,
    partitions: int,
    seed: int,
    result: SmokeResult,
) -> None:
    """Run the transactions, recording every operation of the producer."""
    rng = random.Random(seed)
    conf = {"bootstrap.servers": bootstrap, "transactional.id": "smoke-writer"}
    started = time.monotonic()
    with HistoryWriter(run_dir, WRITER, flush_every=256) as writer:
        writer.record(EventType.START)
        producer = ProducerClient(conf, writer)
        try:
            producer.init(TIMEOUT_S)
            for txn in range(transactions):
                producer.begin(txn)
                for i in range(RECORDS_PER_TXN):
                    value = encode_value(WRITER, txn, i)
                    producer.send(TOPIC, i % partitions, value, key=str(i), txn=txn)
                result.transactions += 1
                if rng.random() < 0.2:
                    producer.flush(TIMEOUT_S)  # aborted records reach the log
                    producer.abort(txn, TIMEOUT_S, retries=3)
                    result.aborted += 1
                else:
                    producer.commit(txn, TIMEOUT_S, retries=3)
                    result.committed += 1
                    result.committed_records += RECORDS_PER_TXN
        finally:
            producer.close(abort_open=True)
            writer.record(EventType.STOP)
    result.produce_seconds = time.monotonic() - started


def consume(run_dir: Path, bootstrap: str, result: SmokeResult) -> None:
    """Read the topic back with a read_committed consumer group, recording every poll."""
    group = f"txnchaos-smoke-{time.time_ns()}"
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    started = time.monotonic()
    with HistoryWriter(run_dir, CONSUMER, flush_every=256) as writer:
        writer.record(EventType.START, group_id=group)
        consumer = ConsumerClient(conf, writer)
        consumer.subscribe([TOPIC])
        idle_deadline = time.monotonic() + TIMEOUT_S
        try:
            while result.consumed < result.committed_records and time.monotonic() < idle_deadline:
                got = len(consumer.poll(5000, 0.5))
                if got:
                    result.consumed += got
                    idle_deadline = time.monotonic() + TIMEOUT_S
        except KafkaException as exc:
            result.problems.append(f"consumer failed: {exc}")
        finally:
            consumer.close()
            writer.record(EventType.STOP, group_id=group)
    result.consume_seconds = time.monotonic() - started


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def record_run(
    run_dir: Path, root: Path, *, brokers: int, transactions: int, partitions: int
) -> SmokeResult:
    """Start a cluster under ``root``, run the workload into ``run_dir``, stop the cluster."""
    console = make_console()
    result = SmokeResult()
    started_ns = time.time_ns()
    info = {"scenario": "demo", "seed": 1, "started_ns": started_ns, "cluster_kind": "local"}
    write_run_info(run_dir, **info, complete=False)
    with console.status("starting a local cluster"):
        cluster = LocalCluster.prepare(root / "cluster", brokers, 1, [])
        cluster.up()
    bootstrap = cluster.state()["bootstrap"]
    console.print(
        f"cluster up: {brokers} broker(s) + 1 coordinator, bootstrap [bold]{bootstrap}[/]"
    )
    try:
        create_topic(bootstrap, partitions)
        workload_ns = time.time_ns()
        with console.status(f"running {transactions} transactions (about 1 in 5 aborted)"):
            produce(run_dir, bootstrap, transactions, partitions, seed=1, result=result)
        with console.status("reading them back with a read_committed consumer group"):
            consume(run_dir, bootstrap, result)
        with console.status("final read of every partition, final cluster state"):
            ends = final_read(bootstrap, {TOPIC: partitions}, run_dir, timeout_s=60.0)
            capture_final_state(run_dir, bootstrap, ends.partition_state())
        if not ends.complete:
            result.problems.append("the final read did not reach the end of every partition")
    finally:
        with console.status("stopping the cluster"):
            cluster.down()
    write_run_info(
        run_dir,
        **info,
        workload_started_ns=workload_ns,
        ended_ns=time.time_ns(),
        metrics_supported=False,
        complete=True,
    )
    return result


def workload_table(result: SmokeResult) -> Table:
    table = Table(title="txnchaos transactional smoke run")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("transactions", str(result.transactions))
    table.add_row("committed / aborted", f"{result.committed} / {result.aborted}")
    table.add_row("committed records", str(result.committed_records))
    table.add_row("read (read_committed)", str(result.consumed))
    rate = result.transactions / result.produce_seconds if result.produce_seconds else 0
    table.add_row("transaction rate", f"{rate:,.0f} transactions/s")
    return table
