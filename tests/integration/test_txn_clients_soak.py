"""Eight concurrent transactional producers for a minute with random aborts.

Each thread owns a transactional producer and runs transactions of random size over
the topic's partitions (on both brokers), committing most of them and aborting the
rest, flushing before some aborts so aborted records really reach the log. Values
are unique (``p<thread>-<n>``). A read_committed consumer reads along the whole time,
and a fresh one reads everything at the end. Both must return:

* every record of every transaction whose commit returned successfully, exactly once;
* no record of any aborted transaction;
* for a transaction whose outcome the client could not learn (a fatal error during
  commit), all of its records or none;
* each producer's records of one partition in the order they were produced.

``TXNCHAOS_SOAK_SECONDS`` shortens (or lengthens) the minute for local runs.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaException, Producer

from txnchaos.harness.launch.local import LocalCluster

from .txn_clients_support import (
    committed_values,
    consumer,
    create_topic,
    drain,
    txn_cluster,
    txn_producer,
    uncommitted_values,
    unique,
    wait_stable,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PRODUCERS = 8
PARTITIONS = 4
# 30 s in the suite (its time budget); TXNCHAOS_SOAK_SECONDS=600 for a real soak
DURATION_S = float(os.environ.get("TXNCHAOS_SOAK_SECONDS", "30"))


@dataclass
class Txn:
    values: list[bytes]
    outcome: str = "open"  # committed / aborted / unknown


@dataclass
class Worker:
    index: int
    txn_id: str
    txns: list[Txn] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    counter: int = 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Small segments: read_committed fetches cross many segments and their
    # aborted-transaction indexes.
    c = txn_cluster(tmp_path_factory.mktemp("txn-soak"), extra_settings=["log.segment.bytes=65536"])
    yield c
    c.down()


def run_worker(bootstrap: str, topic: str, w: Worker, stop_at: float, seed: int) -> None:
    rng = random.Random(seed)

    def new_producer() -> Producer:
        p = txn_producer(bootstrap, w.txn_id)
        p.init_transactions(60)
        return p

    producer = new_producer()
    while time.monotonic() < stop_at:
        txn = Txn([])
        w.txns.append(txn)
        try:
            producer.begin_transaction()
            for _ in range(rng.randint(1, 25)):
                partition = rng.randrange(PARTITIONS)
                value = f"p{w.index}-{w.counter}-{partition}".encode()
                w.counter += 1
                txn.values.append(value)
                producer.produce(topic, value, partition=partition)
                producer.poll(0)
            roll = rng.random()
            if roll < 0.7:
                commit_with_retries(producer)
                txn.outcome = "committed"
            else:
                if roll < 0.85:
                    producer.flush(60)
                producer.abort_transaction(60)
                txn.outcome = "aborted"
        except KafkaException as exc:
            err = exc.args[0]
            w.errors.append(str(err))
            if err.txn_requires_abort():
                producer.abort_transaction(60)
                txn.outcome = "aborted"
            else:
                # Fatal: the outcome is unknown to us. A new instance fences the old one
                # (aborting its transaction if it was still open).
                txn.outcome = "unknown"
                producer = new_producer()
    producer.flush(60)


def commit_with_retries(producer: Producer) -> None:
    for _ in range(5):
        try:
            producer.commit_transaction(60)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
    producer.commit_transaction(60)


def check(read: list[bytes], workers: list[Worker], who: str) -> None:
    counts = Counter(read)
    assert {v: n for v, n in counts.items() if n > 1} == {}, f"{who}: duplicates"
    seen = set(read)
    txns = [t for w in workers for t in w.txns]
    committed = {v for t in txns if t.outcome == "committed" for v in t.values}
    aborted = {v for t in txns if t.outcome == "aborted" for v in t.values}
    assert not committed - seen, f"{who}: {len(committed - seen)} committed records missing"
    assert not aborted & seen, f"{who}: {len(aborted & seen)} aborted records returned"
    unknown = [t for t in txns if t.outcome == "unknown"]
    for t in unknown:
        visible = len(set(t.values) & seen)
        assert visible in (0, len(t.values)), f"{who}: partial transaction {t.values}"
    allowed = committed | {v for t in unknown for v in t.values}
    assert not seen - allowed, f"{who}: records of no transaction: {sorted(seen - allowed)[:5]}"
    # Per producer and partition, in production order.
    last: dict[tuple[str, str], int] = {}
    for v in read:
        producer, n, partition = v.decode().split("-")
        key = (producer, partition)
        assert last.get(key, -1) < int(n), f"{who}: {v!r} out of order"
        last[key] = int(n)


@pytest.mark.nightly  # a soak: the nightly run, not CI's 30 minutes
def test_eight_producers_with_random_aborts(cluster: LocalCluster) -> None:
    bootstrap = cluster.state()["bootstrap"]
    topic = unique("soak")
    create_topic(bootstrap, topic, PARTITIONS)
    workers = [Worker(i, unique(f"soak-tx{i}")) for i in range(PRODUCERS)]

    live_read: list[bytes] = []
    live_stop = threading.Event()
    live_errors: list[BaseException] = []

    def live_reader() -> None:
        c = consumer(bootstrap, "read_committed")
        try:
            c.subscribe([topic])
            while not live_stop.is_set():
                live_read.extend(m.value() for m in drain(c, 0.3))
        except BaseException as exc:
            live_errors.append(exc)
        finally:
            c.close()

    reader = threading.Thread(target=live_reader, daemon=True)
    reader.start()

    stop_at = time.monotonic() + DURATION_S
    threads = [
        threading.Thread(target=run_worker, args=(bootstrap, topic, w, stop_at, 1000 + w.index))
        for w in workers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DURATION_S + 300)
        assert not t.is_alive(), "a producer thread hung"

    wait_stable(bootstrap, topic, range(PARTITIONS))
    final = committed_values(bootstrap, topic, range(PARTITIONS))
    check(final, workers, "final reader")

    deadline = time.monotonic() + 60
    while len(live_read) < len(final) and time.monotonic() < deadline:
        time.sleep(0.2)
    live_stop.set()
    reader.join(30)
    assert live_errors == []
    check(live_read, workers, "live reader")

    # Aborted records did reach the log (flush before abort): filtering was exercised.
    everything = set(uncommitted_values(bootstrap, topic, range(PARTITIONS)))
    txns = [t for w in workers for t in w.txns]
    aborted_in_log = {v for t in txns if t.outcome == "aborted" for v in t.values} & everything
    assert aborted_in_log, "no aborted record reached the log"

    outcomes = Counter(t.outcome for t in txns)
    assert outcomes["committed"] > PRODUCERS and outcomes["aborted"] > 0, outcomes
    print(
        f"{len(txns)} transactions {dict(outcomes)}; {len(final)} records read; "
        f"{len(aborted_in_log)} aborted records in the log; "
        f"client errors: {Counter(e for w in workers for e in w.errors).most_common(5)}"
    )
