"""Consume-transform-produce stays exactly-once across a copier restart.

A copier process (``txn_clients_procs.py copy``) reads a pre-filled input topic with a
read_committed group consumer, writes ``out:<value>`` to an output topic and commits
the input offsets in the same transaction (send_offsets_to_transaction). It is
SIGKILLed while a transaction is open (its output records already flushed to the
log), a second one after it also sent its offsets (so they are pending in the group
coordinator), and a third copier with the same transactional.id and group finishes:
every input record's output appears exactly once to read_committed consumers, and
the committed group offsets reach the end of the input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from txnchaos.harness.launch.local import LocalCluster

from .txn_clients_support import (
    Helper,
    committed_values,
    create_topic,
    txn_cluster,
    uncommitted_values,
    unique,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 900


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = txn_cluster(tmp_path_factory.mktemp("txn-copier"))
    yield c
    c.down()


def fill(bootstrap: str, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    vals = [f"in-{i}".encode() for i in range(RECORDS)]
    for i, v in enumerate(vals):
        producer.produce(topic, v, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    return vals


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def test_copier_restart_is_exactly_once(cluster: LocalCluster) -> None:
    bootstrap = cluster.state()["bootstrap"]
    in_topic, out_topic = unique("copy-in"), unique("copy-out")
    create_topic(bootstrap, in_topic, PARTITIONS)
    create_topic(bootstrap, out_topic, PARTITIONS)
    inputs = fill(bootstrap, in_topic)
    txn_id, group = unique("copier-tx"), unique("copier-group")
    args = ("copy", bootstrap, txn_id, group, in_topic, out_topic, "15", "0.05")

    # Kill one copier while its transaction holds flushed output, the next after it
    # has also sent its offsets (pending in the group coordinator); a third finishes.
    # Each holds at that point until killed: a copier that went on would commit before
    # a slow test read the line, and there would be nothing open left to kill.
    seen_before = 0
    for kill_at in ("INTXN", "OFFSETS"):
        copier = Helper(*args, f"{kill_at}@6")
        try:
            copier.wait_for_line("COMMITTED 5", timeout=120)
            copier.wait_for_line(f"{kill_at} 6")
            copier.kill9()
        finally:
            copier.close()
        assert not any(line.startswith("DONE") for line in copier.output)
        partial = committed_values(bootstrap, out_topic, range(PARTITIONS))
        assert seen_before < len(partial) < RECORDS
        assert len(partial) == len(set(partial))
        seen_before = len(partial)

    last = Helper(*args)
    try:
        last.wait_for_line("DONE", timeout=120)
        assert last.wait() == 0, "".join(last.output)
    finally:
        last.close()

    out = committed_values(bootstrap, out_topic, range(PARTITIONS))
    counts = Counter(out)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert duplicates == {}
    assert set(out) == {b"out:" + v for v in inputs}
    # The killed copier's open transaction did reach the log (and was aborted), so the
    # log holds more output than read_committed returns: filtering really happened.
    assert len(uncommitted_values(bootstrap, out_topic, range(PARTITIONS))) > RECORDS
    ends = {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert group_offsets(bootstrap, group, in_topic) == ends
