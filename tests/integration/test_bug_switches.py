"""The ``txnchaos.bug.*`` switches (cluster/bugs.py) on real nodes with unmodified
confluent-kafka clients: each switch, on, produces the anomaly of the bug it recreates
(and the harness's hanging-transactions checker flags the hanging one); the same steps
on a correct cluster do not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from txnchaos.harness.launch.local import LocalCluster

from .test_kip890_cases import Tv
from .txn_clients_support import (
    WAIT_S,
    committed_values,
    create_topic,
    txn_cluster,
    txn_producer,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

EXPIRY = "txnchaos.bug.producer.expiry.ignores.open.transactions"
LSO = "txnchaos.bug.lso.ignores.open.transactions"
ABORTED_INDEX = "txnchaos.bug.fetch.ignores.aborted.index"
# Producer state expires within a second and a half, checked every 100 ms.
FAST_EXPIRY = ["producer.id.expiration.ms=1500", "log.retention.check.interval.ms=100"]


class Clusters:
    """One cluster per configuration, started on first use and shared by the module."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: dict[str, LocalCluster] = {}

    def get(self, bug: str | None) -> Tv:
        key = bug or "correct"
        if key not in self.running:
            settings = [*FAST_EXPIRY, *([f"{bug}=true"] if bug else [])]
            self.running[key] = txn_cluster(
                self.root / key.replace(".", "-"), brokers=1, extra_settings=settings
            )
        return Tv(2, self.running[key])

    def down(self) -> None:
        for cluster in self.running.values():
            cluster.down()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    c = Clusters(tmp_path_factory.mktemp("bug-switches"))
    try:
        yield c
    finally:
        c.down()


def producers_on(tv: Tv, topic: str) -> set[int]:
    """DescribeProducers of partition 0: every producer id the leader keeps state for."""
    r = asyncio.run(tv.request(61, 0, topics=[{"name": topic, "partition_indexes": [0]}]))
    p = r.topics[0].partitions[0]
    assert int(p.error_code) == 0, p
    return {s.producer_id for s in p.active_producers}


def open_transaction(tv: Tv, topic: str, value: bytes) -> tuple[Producer, str]:
    txn_id = unique("bug-open")
    p = txn_producer(tv.bootstrap, txn_id)
    p.init_transactions(WAIT_S)
    p.begin_transaction()
    p.produce(topic, value, partition=0)
    assert p.flush(WAIT_S) == 0
    return p, txn_id


def topic_on(tv: Tv) -> str:
    name = unique("bug")
    create_topic(tv.bootstrap, name, 1)
    return name


@pytest.mark.parametrize("bug", [None, EXPIRY], ids=["correct", "bug"])
def test_producer_state_expired_under_an_open_transaction(
    clusters: Clusters, bug: str | None
) -> None:
    """KAFKA-9144: with the bug, the open transaction's producer state expires; its
    commit marker then ends nothing and the partition's LSO never moves again."""
    tv = clusters.get(bug)
    topic = topic_on(tv)
    p, txn_id = open_transaction(tv, topic, b"open")
    (txn_pid,) = tv.open_txns(topic, 0)
    # A witness idempotent producer writes after the transaction's record: once its state
    # has expired, the expiry check has run past the open producer's deadline too.
    witness = Producer({"bootstrap.servers": tv.bootstrap, "enable.idempotence": True})
    witness.produce(topic, b"witness", partition=0)
    assert witness.flush(WAIT_S) == 0
    witness_pids = producers_on(tv, topic) - {txn_pid}
    assert len(witness_pids) == 1
    wait_until(lambda: not producers_on(tv, topic) & witness_pids, "the witness to expire")

    assert (txn_pid in producers_on(tv, topic)) == (bug is None)
    p.commit_transaction(WAIT_S)
    asyncio.run(tv.wait_state(txn_id, "CompleteCommit"))  # its marker is written
    lso, hw = tv.lso_and_hw(topic, 0)
    if bug is None:
        assert lso == hw
        assert tv.hanging_checker(topic, 0) == set()
    else:
        assert lso == 0 < hw, (lso, hw)  # held at the expired transaction's first record
        assert "end_lso_lag" in tv.hanging_checker(topic, 0)


@pytest.mark.parametrize("bug", [None, LSO], ids=["correct", "bug"])
def test_lso_that_ignores_open_transactions(clusters: Clusters, bug: str | None) -> None:
    """With the bug, the LSO is the high watermark: read_committed consumers read a
    transaction that is still open (and is then aborted)."""
    tv = clusters.get(bug)
    topic = topic_on(tv)
    p, txn_id = open_transaction(tv, topic, b"uncommitted")
    lso, hw = tv.lso_and_hw(topic, 0)
    assert hw == 1
    if bug is None:
        assert lso == 0
    else:
        assert lso == hw
        assert committed_values(tv.bootstrap, topic, [0]) == [b"uncommitted"]
    p.abort_transaction(WAIT_S)
    asyncio.run(tv.wait_state(txn_id, "CompleteAbort"))
    assert committed_values(tv.bootstrap, topic, [0]) == []


@pytest.mark.parametrize("bug", [None, ABORTED_INDEX], ids=["correct", "bug"])
def test_fetch_that_ignores_the_aborted_index(clusters: Clusters, bug: str | None) -> None:
    """With the bug, read_committed fetches carry no aborted transactions: consumers
    read an aborted transaction's records."""
    tv = clusters.get(bug)
    topic = topic_on(tv)
    p, txn_id = open_transaction(tv, topic, b"aborted")
    p.abort_transaction(WAIT_S)
    asyncio.run(tv.wait_state(txn_id, "CompleteAbort"))
    tv.witness_commit(topic, 0, b"committed")
    expected = [b"committed"] if bug is None else [b"aborted", b"committed"]
    assert committed_values(tv.bootstrap, topic, [0]) == expected
