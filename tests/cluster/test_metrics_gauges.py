"""PartitionsWithLateTransactionsCount counts partitions with an open transaction that
has run longer than transaction.max.timeout.ms + 5 minutes (KIP-664), the padding
configurable."""

from __future__ import annotations

from dataclasses import dataclass

from txnchaos.cluster.metrics import LATE_TRANSACTION_GRACE_MS, PartitionGauges


@dataclass
class FakePartition:
    topic: str
    index: int
    longest_open_transaction_start_ms: int
    log_end_offset: int = 10
    log_start_offset: int = 0
    size_bytes: int = 100
    high_watermark: int = 10
    last_stable_offset: int = 4
    producer_count: int = 2


def _gauges(
    partitions: list[FakePartition], now_ms: int, padding_ms: int = LATE_TRANSACTION_GRACE_MS
) -> dict[str, list]:
    g = PartitionGauges(lambda: partitions, 60_000, padding_ms, clock_ms=lambda: now_ms)
    return {m.name: m.samples for m in g.collect()}


def test_late_transactions_are_counted_after_the_grace_period() -> None:
    now = 10_000_000
    limit = 60_000 + LATE_TRANSACTION_GRACE_MS
    parts = [
        FakePartition("t", 0, -1),  # no open transaction
        FakePartition("t", 1, now - limit + 1),  # open, not late yet
        FakePartition("t", 2, now - limit - 1),  # late
    ]
    samples = _gauges(parts, now)
    late = samples["kafka_server_replicamanager_partitionswithlatetransactionscount"]
    assert late[0].value == 1
    assert samples["kafka_server_replicamanager_produceridcount"][0].value == 6
    lags = {
        s.labels["partition"]: s.value
        for s in samples["kafka_cluster_partition_laststableoffsetlag"]
    }
    assert lags == {"0": 6, "1": 6, "2": 6}


def test_the_padding_is_configurable() -> None:
    now = 10_000_000
    parts = [FakePartition("t", 0, now - 60_000 - 1_001)]
    late = "kafka_server_replicamanager_partitionswithlatetransactionscount"
    assert _gauges(parts, now)[late][0].value == 0  # within max + 5 minutes
    assert _gauges(parts, now, padding_ms=1_000)[late][0].value == 1
