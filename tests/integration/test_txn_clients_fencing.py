"""Producers that go away without finishing their transaction.

* Zombie fencing: a second producer with the same transactional.id fences the first;
  the first's open transaction is aborted and none of it becomes visible, and the
  first producer's next operation fails with a fatal fencing error.
* A producer SIGKILLed mid-transaction (its records flushed to the log) holds
  read_committed consumers at the LSO until the coordinator aborts the transaction at
  its transaction.timeout.ms; then consumers move on, and none of its records are
  ever returned to them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException

from txnchaos.harness.launch.local import LocalCluster

from .txn_clients_support import (
    Helper,
    committed_values,
    consumer,
    create_topic,
    drain,
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
    c = txn_cluster(tmp_path_factory.mktemp("txn-fencing"))
    yield c
    c.down()


@pytest.fixture
def bootstrap(cluster: LocalCluster) -> str:
    return cluster.state()["bootstrap"]


@pytest.mark.parametrize("first_action", ["produce", "add-partition", "commit"])
def test_zombie_is_fenced(bootstrap: str, first_action: str) -> None:
    topic = unique("zombie")
    create_topic(bootstrap, topic, 3)
    txn_id = unique("zombie-tx")

    zombie = txn_producer(bootstrap, txn_id)
    zombie.init_transactions(60)
    zombie.begin_transaction()
    zombie_values = [f"zombie-{i}".encode() for i in range(20)]
    for i, v in enumerate(zombie_values):
        zombie.produce(topic, v, partition=i % 2)
    assert zombie.flush(60) == 0  # in the log, uncommitted

    # The new instance fences the zombie; its open transaction is aborted first.
    successor = txn_producer(bootstrap, txn_id)
    successor.init_transactions(60)

    with pytest.raises(KafkaException) as excinfo:
        if first_action == "produce":
            # The broker refuses the old epoch: the abort marker the fence wrote
            # carried the bumped one.
            zombie.produce(topic, b"zombie-late", partition=0)
            zombie.flush(30)
        elif first_action == "add-partition":
            # A partition new to the transaction: the coordinator refuses the epoch.
            zombie.produce(topic, b"zombie-late", partition=2)
            zombie.flush(30)
        zombie.commit_transaction(30)
    err = excinfo.value.args[0]
    assert err.fatal() and err.code() == KafkaError._FENCED, err

    successor.begin_transaction()
    good = [f"good-{i}".encode() for i in range(10)]
    for i, v in enumerate(good):
        successor.produce(topic, v, partition=i % 3)
    successor.commit_transaction(60)

    got = committed_values(bootstrap, topic, [0, 1, 2])
    assert sorted(got) == sorted(good)
    seen = uncommitted_values(bootstrap, topic, [0, 1, 2])
    assert set(zombie_values) <= set(seen)  # they reached the log: the abort hid them
    assert b"zombie-late" not in seen


def test_fenced_producer_cannot_start_again(bootstrap: str) -> None:
    """After being fenced, the zombie's every transactional call fails (the fatal error
    is sticky): it cannot sneak a later transaction in."""
    topic = unique("zombie2")
    create_topic(bootstrap, topic, 1)
    txn_id = unique("zombie2-tx")
    zombie = txn_producer(bootstrap, txn_id)
    zombie.init_transactions(60)
    successor = txn_producer(bootstrap, txn_id)
    successor.init_transactions(60)

    zombie.begin_transaction()  # local state only
    zombie.produce(topic, b"late", partition=0)
    with pytest.raises(KafkaException) as excinfo:
        zombie.commit_transaction(30)
    err = excinfo.value.args[0]
    assert err.fatal() and err.code() == KafkaError._FENCED, err
    with pytest.raises(KafkaException):
        zombie.begin_transaction()
    assert committed_values(bootstrap, topic, [0]) == []


def test_killed_producer_is_aborted_by_timeout(bootstrap: str) -> None:
    topic = unique("killed")
    create_topic(bootstrap, topic, 2)
    doomed = Helper("hang", bootstrap, unique("doomed-tx"), topic, "0,1", "30", "doomed", "2000")
    try:
        doomed.wait_for_line("READY")
        doomed.kill9()
    finally:
        doomed.close()
    doomed_values = {f"doomed-{i}".encode() for i in range(30)}
    assert doomed_values <= set(uncommitted_values(bootstrap, topic, [0, 1]))

    # A live producer commits after the doomed records; a read_committed consumer
    # first sees nothing past the LSO, then, once the coordinator aborts the timed-out
    # transaction, exactly the later committed records.
    survivor = txn_producer(bootstrap, unique("survivor-tx"))
    survivor.init_transactions(60)
    survivor.begin_transaction()
    later = [f"later-{i}".encode() for i in range(20)]
    for i, v in enumerate(later):
        survivor.produce(topic, v, partition=i % 2)
    survivor.commit_transaction(60)

    live = consumer(bootstrap, "read_committed")
    live.subscribe([topic])
    try:
        got: list[bytes] = []
        wait_until(
            lambda: got.extend(m.value() for m in drain(live, 0.5)) or len(got) >= len(later),
            "the consumer to move past the killed producer's transaction",
        )
        got.extend(m.value() for m in drain(live, 2.0))
        assert sorted(got) == sorted(later)
    finally:
        live.close()
    for p in (0, 1):
        assert offsets(bootstrap, topic, p, "read_committed") == offsets(
            bootstrap, topic, p, "read_uncommitted"
        )
    assert not doomed_values & set(committed_values(bootstrap, topic, [0, 1]))
