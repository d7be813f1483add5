"""The coordinator's marker-queue gauges: Kafka's UnknownDestinationQueueSize (markers whose
partition has no known leader) and the markers not written yet."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.coordinator.transactions.txn_support import NONE, Harness, async_test
from txnchaos.cluster.metrics import TransactionMarkerGauges

UNKNOWN = (
    "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
)
PENDING = "txnchaos_transaction_markers_pending"


def _values(h: Harness) -> dict[str, float]:
    return {
        m.name: m.samples[0].value for m in TransactionMarkerGauges(h.coordinator.markers).collect()
    }


@async_test
async def test_markers_without_a_leader_are_counted_until_written(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    err, pid, epoch = await h.init()
    assert err == NONE
    assert set((await h.add(pid, epoch, {"t1": [0], "t2": [0, 1]})).values()) == {NONE}
    assert _values(h) == {UNKNOWN: 0, PENDING: 0}
    h.routing.leaders = {"t1": 1, "t2": None}
    h.transport.down = {1}
    await h.end(pid, epoch, False)
    await h.flush()
    assert _values(h) == {UNKNOWN: 2, PENDING: 3}
    h.transport.down = set()
    h.routing.leaders = {"t1": 1, "t2": 2}
    h.clock.advance(10_000)
    await h.flush()
    assert h.state() == "CompleteAbort"
    assert _values(h) == {UNKNOWN: 0, PENDING: 0}
