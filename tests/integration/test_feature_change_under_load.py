"""transaction.version changed while an unmodified confluent-kafka producer runs
transactions: upgrade 0 -> 2, downgrade 2 -> 0, upgrade 0 -> 1. Nothing committed is
lost, nothing aborted is seen by read_committed, and the producer never fails."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from ..conftest import start_cluster
from .raw_client import RawClient, address
from .test_produce_consume import create_topic
from .test_txn_verification import scrape

pytestmark = pytest.mark.integration

TOPIC = "tv-load"
STEP = 5  # transactions run between two feature changes
WAIT_S = 120.0  # a bound on a hang, not a timing assertion


class TransactionalLoad:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.committed: set[str] = set()
        self.aborted: set[str] = set()
        self.done = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.progress = threading.Condition()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "tv-load"})
        try:
            producer.init_transactions(30)
            n = 0
            while not self.stop.is_set():
                values = [f"{n}-{p}" for p in (0, 1)]
                producer.begin_transaction()
                for p, value in enumerate(values):
                    producer.produce(TOPIC, value.encode(), partition=p)
                producer.flush(30)
                if n % 4 == 3:
                    producer.abort_transaction(30)
                    self.aborted.update(values)
                else:
                    producer.commit_transaction(30)
                    self.committed.update(values)
                n += 1
                with self.progress:
                    self.done = n
                    self.progress.notify_all()
        except BaseException as exc:  # surfaced by the test
            self.error = exc
            with self.progress:
                self.progress.notify_all()

    def wait_for(self, count: int) -> None:
        with self.progress:
            assert self.progress.wait_for(
                lambda: self.done >= count or self.error is not None, WAIT_S
            ), f"no progress past {self.done} transactions"
        assert self.error is None, self.error


def set_level(client: RawClient, level: int, upgrade_type: int) -> None:
    r = client.request(
        57,
        1,
        feature_updates=[
            {
                "feature": "transaction.version",
                "max_version_level": level,
                "upgrade_type": upgrade_type,
            }
        ],
        validate_only=False,
    )
    assert int(r.error_code) == 0, r


def read_committed(bootstrap: str) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tv-load-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([TOPIC])
    seen, eof = [], set()
    try:
        while len(eof) < 2:
            msg = consumer.poll(10)
            assert msg is not None, "no progress reading back"
            if msg.error():
                eof.add(msg.partition())
                continue
            seen.append(msg.value().decode())
    finally:
        consumer.close()
    return seen


def test_feature_changes_during_transactions_lose_nothing(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", brokers=2, settings=["transaction.version=0"])
    bootstrap = cluster.state()["bootstrap"]
    admin = RawClient(*address(bootstrap))
    load = TransactionalLoad(bootstrap)
    try:
        create_topic(bootstrap, TOPIC, 2)
        load.thread.start()
        load.wait_for(STEP)
        for step, (level, kind) in enumerate(((2, 1), (0, 2), (1, 1)), start=2):
            set_level(admin, level, kind)
            load.wait_for(step * STEP)
        load.stop.set()
        load.thread.join(WAIT_S)
        assert load.error is None, load.error
        seen = read_committed(bootstrap)
        assert len(seen) == len(set(seen))  # no duplicates
        assert set(seen) == load.committed
        assert not set(seen) & load.aborted
        verified = sum(
            scrape(n["metrics_port"]).get(
                "kafka_server_addpartitionstotxnmanager_verificationtimems_count", 0.0
            )
            for n in cluster.state()["nodes"]
        )
        assert verified > 0  # the TV2 and TV1 phases verified the producer's writes
    finally:
        load.stop.set()
        admin.close()
        cluster.down()
