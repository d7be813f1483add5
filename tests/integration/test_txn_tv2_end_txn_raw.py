"""KIP-890 part 2 and KIP-360 on the transaction coordinator of a real node, driven by
hand-built requests (a TV2 client: EndTxn v5):

* every EndTxn v5 bumps the epoch, answers the producer id and epoch to use next, and
  the broker's markers close the transaction with the bumped epoch;
* a retry of an EndTxn whose answer was lost gets the same answer, also after the
  node is killed (-9) and restarted;
* at the last epoch the answer (and the coordinator) moves onto a new producer id;
* InitProducerId v3+ with the current producer id/epoch (KIP-360).

Records are read back with a confluent-kafka read_committed consumer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from txnchaos.cluster.coordinator.transactions import TxnState, TxnTransit, store
from txnchaos.cluster.coordinator.transactions.metadata import MAX_EPOCH
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.local import LocalCluster, node_dir

from ..conftest import start_cluster
from .raw_client import RawClient, address
from .test_produce_consume import create_topic
from .test_txn_markers_raw import consume_values

pytestmark = pytest.mark.integration

TOPIC = "tv2"
LAST = MAX_EPOCH - 1  # the last epoch a client may hold
NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
RETRIABLE = {14, 15, 16, 51}  # coordinator loading / not available / not coordinator


def wait_until(condition: Callable[[], bool], what: str, attempts: int = 300) -> None:
    """Poll a condition (bounded: ~30 s); no timing is asserted."""
    for _ in range(attempts):
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def error_of(response: Any) -> int:
    """The error of a coordinator answer (AddPartitionsToTxn v3: its first partition's)."""
    if hasattr(response, "error_code"):
        return int(response.error_code)
    topic = response.results_by_topic_v3_and_below[0]
    return int(topic.results_by_partition[0].partition_error_code)


class Txn:
    """A TV2 transactional client speaking raw requests to the single node."""

    def __init__(self, cluster: LocalCluster, txn_id: str) -> None:
        self.cluster = cluster
        self.txn_id = txn_id
        self.client = RawClient(*address(cluster.state()["bootstrap"]))

    def reconnect(self) -> None:
        self.client.close()
        self.client = RawClient(*address(self.cluster.state()["bootstrap"]))

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """A coordinator request, retried while the coordinator (re)loads."""
        for _ in range(300):
            r = self.client.request(api_key, version, **fields)
            if error_of(r) not in RETRIABLE - {CONCURRENT_TRANSACTIONS}:
                return r
            time.sleep(0.1)
        raise AssertionError(f"coordinator never answered {api_key} v{version}: {r}")

    def init(self, pid: int = -1, epoch: int = -1, version: int = 5) -> tuple[int, int, int]:
        r = self.call(
            22,
            version,
            transactional_id=self.txn_id,
            transaction_timeout=60_000,
            producer_id=pid,
            producer_epoch=epoch,
        )
        return int(r.error_code), r.producer_id, r.producer_epoch

    def add(self, pid: int, epoch: int) -> None:
        r = self.call(
            24,
            3,
            v3_and_below_transactional_id=self.txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}],
        )
        codes = [int(p.partition_error_code) for t in r.results_by_topic_v3_and_below
                 for p in t.results_by_partition]  # fmt: skip
        assert codes == [NONE], r

    def produce(self, pid: int, epoch: int, seq: int, values: list[bytes]) -> int:
        batch = encode_batch(
            values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
        )
        return int(self.client.produce(TOPIC, 0, batch, transactional_id=self.txn_id).error_code)

    def end(self, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
        r = self.call(
            26,
            5,
            transactional_id=self.txn_id,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        )
        return int(r.error_code), r.producer_id, r.producer_epoch

    def closed(self) -> bool:
        """No open transaction on the partition: the LSO reached the high watermark."""
        lso = self.client.latest_offset(TOPIC, 0, isolation=1)
        return lso == self.client.latest_offset(TOPIC, 0, isolation=0)

    def transaction(self, pid: int, epoch: int, values: list[bytes], commit: bool) -> tuple:
        self.add(pid, epoch)
        assert self.produce(pid, epoch, 0, values) == NONE
        answer = self.end(pid, epoch, commit)
        wait_until(self.closed, "the markers")
        return answer

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    cluster = start_cluster(tmp_path / "cluster", brokers=1)
    create_topic(cluster.state()["bootstrap"], TOPIC, 1)
    yield cluster
    cluster.down()


def crash_and_restart(cluster: LocalCluster, txn: Txn) -> None:
    cluster.kill_node(1)
    cluster.restart_node(1)
    txn.reconnect()


def committed_values(cluster: LocalCluster) -> list[bytes]:
    bootstrap = cluster.state()["bootstrap"]
    hw = RawClient(*address(bootstrap))
    try:
        end = hw.latest_offset(TOPIC, 0)
    finally:
        hw.close()
    return consume_values(bootstrap, TOPIC, "read_committed", end)


def test_end_txn_v5_bumps_the_epoch_and_a_retry_survives_a_crash(cluster: LocalCluster) -> None:
    txn = Txn(cluster, "tv2-bump")
    try:
        versions = txn.client.request(
            18, 3, client_software_name="txnchaos-test", client_software_version="1"
        )
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert ranges[26] == (0, 5) and ranges[22] == (0, 6)  # EndTxn, InitProducerId (v6: KIP-939)
        err, pid, e0 = txn.init()
        assert err == NONE
        assert txn.transaction(pid, e0, [b"c1", b"c2"], True) == (NONE, pid, e0 + 1)
        # The answer was lost: the retry gets it again.
        assert txn.end(pid, e0, True) == (NONE, pid, e0 + 1)
        # The broker knows the bumped epoch from the marker: the old one is refused.
        assert txn.produce(pid, e0, 2, [b"late"]) in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED)
        assert txn.transaction(pid, e0 + 1, [b"a1"], False) == (NONE, pid, e0 + 2)
        crash_and_restart(cluster, txn)
        assert txn.end(pid, e0 + 1, False) == (NONE, pid, e0 + 2)
        assert txn.end(pid, e0 + 1, True)[0] != NONE  # not the outcome it had
        assert txn.end(pid, e0, True) == (PRODUCER_FENCED, -1, -1)
        assert txn.transaction(pid, e0 + 2, [b"c3"], True) == (NONE, pid, e0 + 3)
        assert committed_values(cluster) == [b"c1", b"c2", b"c3"]
    finally:
        txn.close()


def seed_epoch(cluster: LocalCluster, txn_id: str, pid: int, epoch: int) -> None:
    """Persist the transactional id as a TV2 producer at ``epoch`` (as if that many
    transactions had ended) while the node is down."""
    data_dir = node_dir(cluster.data_dir, 1) / "transactions"
    partition = next(
        p
        for p in range(50)
        if store.read_partition(store.log_path(data_dir, p)).transactions.get(txn_id)
    )
    current = store.read_partition(store.log_path(data_dir, partition)).transactions[txn_id]
    assert current.producer_id == pid
    seeded = TxnTransit(
        TxnState.COMPLETE_COMMIT, pid, pid, epoch, epoch - 1, current.txn_timeout_ms,
        frozenset(), current.txn_last_update_ms, current.txn_last_update_ms,
        client_transaction_version=2,
    )  # fmt: skip
    slog = store.open_log(data_dir, partition, fsync=True, compact_min_bytes=1 << 30)
    try:
        slog.append(store.txn_record(txn_id, seeded))
    finally:
        slog.close()


def test_overflow_moves_onto_a_new_producer_id(cluster: LocalCluster) -> None:
    txn = Txn(cluster, "tv2-overflow")
    try:
        err, pid, _ = txn.init()
        assert err == NONE
        cluster.stop_node(1)
        seed_epoch(cluster, "tv2-overflow", pid, LAST)
        cluster.restart_node(1)
        txn.reconnect()
        err, new_pid, epoch = txn.transaction(pid, LAST, [b"last"], True)
        assert err == NONE and new_pid not in (pid, -1) and epoch == 0
        # The retry of the lost answer, before and after a crash.
        assert txn.end(pid, LAST, True) == (NONE, new_pid, 0)
        crash_and_restart(cluster, txn)
        assert txn.end(pid, LAST, True) == (NONE, new_pid, 0)
        # The old producer id is closed at Short.MaxValue by the marker; the coordinator
        # no longer maps the transactional id to it (verification, as Kafka answers).
        zombie = txn.produce(pid, LAST, 1, [b"zombie"])
        assert zombie in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING)
        assert txn.transaction(new_pid, 0, [b"first"], True) == (NONE, new_pid, 1)
        assert txn.end(pid, LAST, True)[0] != NONE  # no longer a retry
        assert committed_values(cluster) == [b"last", b"first"]
    finally:
        txn.close()


def test_init_producer_id_with_the_current_identity(cluster: LocalCluster) -> None:
    txn = Txn(cluster, "kip360")
    try:
        err, pid, e0 = txn.init(version=3)
        assert err == NONE
        assert txn.init(pid, e0, version=3) == (NONE, pid, e0 + 1)  # the bump
        assert txn.init(pid, e0, version=4) == (NONE, pid, e0 + 1)  # its retry
        crash_and_restart(cluster, txn)
        assert txn.init(pid, e0) == (NONE, pid, e0 + 1)  # also after a crash
        e1 = e0 + 1
        assert txn.init(pid, e1 + 7, version=3) == (INVALID_PRODUCER_EPOCH, -1, -1)
        assert txn.init(pid, e1 + 7, version=4) == (PRODUCER_FENCED, -1, -1)
        assert txn.init(pid + 1000, e1)[0] == PRODUCER_FENCED  # another producer id
        # An open transaction is aborted first (the client retries after
        # CONCURRENT_TRANSACTIONS); the abort is the TV2 end's one bump, the epoch the
        # request named kept as the last one, so the retry recovers onto it (Kafka 4.x).
        txn.add(pid, e1)
        assert txn.produce(pid, e1, 0, [b"open"]) == NONE
        assert txn.init(pid, e1)[0] == CONCURRENT_TRANSACTIONS
        wait_until(txn.closed, "the abort markers")
        assert txn.init(pid, e1) == (NONE, pid, e1 + 1)
        err, pid2, e2 = txn.init()  # a new instance
        assert err == NONE and pid2 == pid and e2 > e1 + 1
        assert committed_values(cluster) == []
        # A producer whose transactional id expired gets a fresh producer id.
        fresh = Txn(cluster, "never-seen")
        try:
            err, other, epoch = fresh.init(pid, e2)
            assert err == NONE and other != pid and epoch == 0
        finally:
            fresh.close()
    finally:
        txn.close()
