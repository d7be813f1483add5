"""A consumer group of two confluent-kafka members: assignment, rebalance when one
leaves, commits, and committed()."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .test_produce_consume import create_topic

pytestmark = pytest.mark.integration


def member(bootstrap: str, group: str, assigned: threading.Event, log: list) -> Consumer:
    def on_assign(consumer, partitions):  # type: ignore[no-untyped-def]
        log.append(("assign", sorted(p.partition for p in partitions)))
        assigned.set()

    def on_revoke(consumer, partitions):  # type: ignore[no-untyped-def]
        log.append(("revoke", sorted(p.partition for p in partitions)))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe([group], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


def poll_until(consumers: list[Consumer], done, sink: list, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                sink.append((c, msg))
    assert done(), "condition not reached in time"


def test_group_rebalances_commits_and_committed(bootstrap: str, topic_name: str) -> None:
    group = topic_name
    create_topic(bootstrap, group, 4)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(400):
        producer.produce(group, value=str(i).encode(), partition=i % 4)
    assert producer.flush(30) == 0

    log_a: list = []
    log_b: list = []
    a_assigned, b_assigned = threading.Event(), threading.Event()
    a = member(bootstrap, group, a_assigned, log_a)
    b = member(bootstrap, group, b_assigned, log_b)
    got: list = []
    try:
        # Both members get assignments that split the four partitions.
        poll_until(
            [a, b],
            lambda: (
                len(a.assignment()) + len(b.assignment()) == 4
                and bool(a.assignment())
                and bool(b.assignment())
            ),
            got,
        )
        mine_a = {p.partition for p in a.assignment()}
        mine_b = {p.partition for p in b.assignment()}
        assert not mine_a & mine_b and mine_a | mine_b == {0, 1, 2, 3}

        # Together they read every record exactly once, each from its own partitions.
        poll_until([a, b], lambda: len(got) >= 400, got)
        assert len(got) == 400
        for consumer, msg in got:
            assert msg.partition() in (mine_a if consumer is a else mine_b)
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
        committed = a.committed([TopicPartition(group, p) for p in sorted(mine_a)], timeout=10)
        assert [tp.offset for tp in committed] == [100] * len(mine_a)

        # a leaves: b is given all four partitions and nothing is read again.
        a.close()
        poll_until([b], lambda: len(b.assignment()) == 4, got)
        assert len(got) == 400
        assert ("revoke", sorted(mine_b)) in log_b or ("assign", [0, 1, 2, 3]) in log_b
    finally:
        b.close()

    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = check.committed([TopicPartition(group, p) for p in range(4)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == {0: 100, 1: 100, 2: 100, 3: 100}
    finally:
        check.close()
