"""Transactions seen by real confluent-kafka consumers on a multi-process cluster
(one coordinator process, two broker processes).

* committed records are visible to read_committed and read_uncommitted consumers;
  aborted records (flushed to the log before the abort) only to read_uncommitted;
* an open transaction holds read_committed consumers at the last stable offset:
  committed records of another producer written after it stay invisible until the
  open transaction ends, and then appear in log order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from txnchaos.harness.launch.local import LocalCluster

from .txn_clients_support import (
    committed_values,
    consumer,
    create_topic,
    drain,
    leaders,
    offsets,
    txn_cluster,
    txn_producer,
    uncommitted_values,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = txn_cluster(tmp_path_factory.mktemp("txn-visibility"))
    yield c
    c.down()


@pytest.fixture
def bootstrap(cluster: LocalCluster) -> str:
    return cluster.state()["bootstrap"]


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def test_partitions_spread_over_both_brokers(bootstrap: str) -> None:
    topic = unique("spread")
    create_topic(bootstrap, topic, 4)
    assert set(leaders(bootstrap, topic).values()) == {1, 2}


def test_commit_and_abort_visibility(bootstrap: str) -> None:
    topic = unique("vis")
    create_topic(bootstrap, topic, 2)
    producer = txn_producer(bootstrap, unique("vis-tx"))
    producer.init_transactions(60)

    def run(prefix: str, n: int, commit: bool, flush: bool) -> list[bytes]:
        vals = values(prefix, n)
        producer.begin_transaction()
        for i, v in enumerate(vals):
            producer.produce(topic, v, partition=i % 2)
        if flush:
            assert producer.flush(60) == 0
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
        return vals

    c1 = run("c1", 20, commit=True, flush=False)
    a1 = run("a1", 20, commit=False, flush=True)  # reaches the log, then aborted
    run(
        "a2", 20, commit=False, flush=False
    )  # unsent ones are purged by librdkafka: may never be sent
    c2 = run("c2", 20, commit=True, flush=True)
    a3 = run("a3", 10, commit=False, flush=True)

    got = committed_values(bootstrap, topic, [0, 1])
    assert sorted(got) == sorted(c1 + c2)
    assert len(got) == len(set(got))
    for p in (0, 1):  # per partition in production order
        mine = [v for v in got if v in set(c1[p::2] + c2[p::2])]
        assert mine == c1[p::2] + c2[p::2]

    seen = uncommitted_values(bootstrap, topic, [0, 1])
    # a2's records may or may not have been sent before the abort purged them.
    assert set(seen) - set(values("a2", 20)) == set(c1 + c2 + a1 + a3)
    assert len(seen) == len(set(seen))

    # Every transaction is complete: the LSO is the log end on both partitions.
    for p in (0, 1):
        assert offsets(bootstrap, topic, p, "read_committed") == offsets(
            bootstrap, topic, p, "read_uncommitted"
        )
    producer.flush(10)


def test_open_transaction_holds_read_committed_at_lso(bootstrap: str) -> None:
    topic = unique("lso")
    create_topic(bootstrap, topic, 1)
    other = txn_producer(bootstrap, unique("lso-other"))
    other.init_transactions(60)
    holder = txn_producer(bootstrap, unique("lso-holder"))
    holder.init_transactions(60)

    def committed_batch(prefix: str, n: int) -> list[bytes]:
        vals = values(prefix, n)
        other.begin_transaction()
        for v in vals:
            other.produce(topic, v, partition=0)
        other.commit_transaction(60)
        return vals

    before = committed_batch("before", 10)

    live = consumer(bootstrap, "read_committed")
    live.subscribe([topic])
    try:
        seen: list[bytes] = []
        wait_until(
            lambda: seen.extend(m.value() for m in drain(live, 0.5)) or len(seen) >= 10,
            "the committed records before the open transaction",
        )
        assert seen == before

        # Open a transaction and make sure its records are in the log.
        holder.begin_transaction()
        held = values("held", 15)
        for v in held:
            holder.produce(topic, v, partition=0)
        assert holder.flush(60) == 0
        lso_at_open = len(before) + 1  # records + the commit marker
        wait_until(
            lambda: offsets(bootstrap, topic, 0, "read_uncommitted")[1] == lso_at_open + len(held),
            "the open transaction's records in the log",
        )

        # Committed records of another producer written after the open transaction.
        after = committed_batch("after", 10)
        high = lso_at_open + len(held) + len(after) + 1
        wait_until(
            lambda: offsets(bootstrap, topic, 0, "read_uncommitted")[1] == high,
            "the later committed transaction in the log",
        )
        assert offsets(bootstrap, topic, 0, "read_committed")[1] == lso_at_open

        # read_uncommitted sees everything; read_committed nothing past the LSO, for as
        # long as we care to look (a few fetch rounds of the live consumer and fresh ones).
        assert uncommitted_values(bootstrap, topic, [0]) == before + held + after
        assert committed_values(bootstrap, topic, [0]) == before
        leak = drain(live, 3.0)
        assert [m.value() for m in leak] == []
        assert offsets(bootstrap, topic, 0, "read_committed")[1] == lso_at_open

        # Committing releases everything, in log order.
        holder.commit_transaction(60)
        rest: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(rest) < len(held) + len(after) and time.monotonic() < deadline:
            rest.extend(m.value() for m in drain(live, 0.5))
        assert rest == held + after
        assert offsets(bootstrap, topic, 0, "read_committed")[1] == high + 1
    finally:
        live.close()
