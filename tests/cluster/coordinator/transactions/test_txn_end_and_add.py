"""AddPartitionsToTxn, AddOffsetsToTxn and EndTxn: errors, retries, completion."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TXN_STATE,
    NONE,
    NOT_COORDINATOR,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    UNKNOWN_TOPIC_OR_PARTITION,
    Harness,
    async_test,
)
from txnchaos.cluster.coordinator.groups.hashing import partition_for


async def ready(tmp_path: Path) -> tuple[Harness, int, int]:
    h = Harness(tmp_path).start()
    err, pid, epoch = await h.init()
    assert err == NONE
    return h, pid, epoch


@async_test
async def test_commit_lifecycle(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    assert await h.add(pid, epoch, {"t1": [0], "t2": [1]}) == {("t1", 0): NONE, ("t2", 1): NONE}
    assert h.state() == "Ongoing"
    start = h.coordinator.describe("tx").transaction_start_time_ms
    assert start == h.clock.now
    h.clock.advance(10)
    # Adding a partition already in the transaction is answered without a write.
    assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NONE}
    assert await h.end(pid, epoch, True) == NONE
    assert h.state() == "PrepareCommit"
    assert h.transport.requests == []  # markers only go out when the sender runs
    await h.flush()
    assert h.state() == "CompleteCommit"
    assert [m["tps"] for m in h.transport.markers()] == [[("t1", 0), ("t2", 1)]]
    assert all(m["commit"] for m in h.transport.markers())
    c = h.coordinator.counters
    assert (c.transactions_started, c.transactions_committed, c.transactions_aborted) == (1, 1, 0)
    # The next transaction starts from CompleteCommit with the same epoch (TV0/TV1).
    assert await h.add(pid, epoch, {"t1": [2]}) == {("t1", 2): NONE}
    assert h.coordinator.describe("tx").partitions == (("t1", 2),)
    h.assert_log_matches_memory()


@async_test
async def test_end_txn_retries_are_idempotent(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    await h.add(pid, epoch, {"t1": [0]})
    assert await h.end(pid, epoch, True) == NONE
    # Retried while the markers are still being written: retriable.
    assert await h.end(pid, epoch, True) == CONCURRENT_TRANSACTIONS
    # A different outcome for the same transaction is refused.
    assert await h.end(pid, epoch, False) == CONCURRENT_TRANSACTIONS  # pending first
    await h.flush()
    assert await h.end(pid, epoch, True) == NONE
    assert await h.end(pid, epoch, False) == INVALID_TXN_STATE


@async_test
async def test_end_txn_mismatch_after_abort(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    await h.add(pid, epoch, {"t1": [0]})
    assert await h.end(pid, epoch, False) == NONE
    await h.flush()
    assert h.state() == "CompleteAbort"
    assert await h.end(pid, epoch, False) == NONE
    assert await h.end(pid, epoch, True) == INVALID_TXN_STATE
    assert h.coordinator.counters.transactions_aborted == 1


@async_test
async def test_end_txn_on_empty_transaction_is_invalid(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    assert await h.end(pid, epoch, True) == INVALID_TXN_STATE
    assert await h.end(pid, epoch, False) == INVALID_TXN_STATE


@async_test
async def test_end_txn_identity_errors(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    await h.add(pid, epoch, {"t1": [0]})
    assert await h.end(pid + 1, epoch, True) == INVALID_PRODUCER_ID_MAPPING
    assert await h.end(pid, epoch, True, txn_id="unknown") == INVALID_PRODUCER_ID_MAPPING
    assert await h.end(pid, epoch - 1, True) == PRODUCER_FENCED
    assert await h.end(pid, epoch - 1, True, version=1) == INVALID_PRODUCER_EPOCH
    assert await h.end(pid, epoch, True, txn_id="") == INVALID_REQUEST


@async_test
async def test_add_partitions_while_previous_transaction_completes(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    await h.add(pid, epoch, {"t1": [0]})
    await h.end(pid, epoch, True)
    assert await h.add(pid, epoch, {"t1": [1]}) == {("t1", 1): CONCURRENT_TRANSACTIONS}
    assert await h.add_offsets(pid, epoch, "g") == CONCURRENT_TRANSACTIONS
    await h.flush()
    assert await h.add(pid, epoch, {"t1": [1]}) == {("t1", 1): NONE}


@async_test
async def test_add_partitions_errors(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    assert await h.add(pid + 5, epoch, {"t1": [0]}) == {("t1", 0): INVALID_PRODUCER_ID_MAPPING}
    assert await h.add(pid, epoch, {"t1": [0]}, txn_id="nope") == {
        ("t1", 0): INVALID_PRODUCER_ID_MAPPING
    }
    for version, code in [(0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH),
                          (2, PRODUCER_FENCED), (3, PRODUCER_FENCED)]:  # fmt: skip
        assert await h.add(pid, epoch + 1, {"t1": [0]}, version=version) == {("t1", 0): code}
    # Unknown partitions: the whole request fails, the known ones are not attempted.
    assert await h.add(pid, epoch, {"t1": [0, 7], "nope": [0], "t2": [1]}) == {
        ("t1", 0): OPERATION_NOT_ATTEMPTED,
        ("t1", 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
        ("t2", 1): OPERATION_NOT_ATTEMPTED,
    }
    assert h.state() == "Empty"


@async_test
async def test_add_partitions_not_coordinator(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    h.coordinator.unload_partition(h.coordinator.partition_for("tx"))
    assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NOT_COORDINATOR}
    assert await h.end(pid, epoch, True) == NOT_COORDINATOR


@async_test
async def test_add_offsets_adds_the_group_partition(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    assert await h.add_offsets(pid, epoch, "my-group") == NONE
    tp = ("__consumer_offsets", partition_for("my-group", 5))
    assert h.coordinator.describe("tx").partitions == (tp,)
    assert await h.add_offsets(pid, epoch - 1, "my-group", version=0) == INVALID_PRODUCER_EPOCH
    assert await h.add_offsets(pid, epoch - 1, "my-group", version=2) == PRODUCER_FENCED
    await h.end(pid, epoch, True)
    await h.flush()
    # Offsets markers go to the group partition's owner (node 9 in the fake routing).
    assert h.transport.markers()[0]["node"] == 9
    assert h.transport.markers()[0]["tps"] == [tp]


@async_test
async def test_describe_and_list(tmp_path: Path) -> None:
    h, pid, epoch = await ready(tmp_path)
    await h.init("other")
    await h.add(pid, epoch, {"t1": [0]})
    d = h.coordinator.describe("tx")
    assert (d.error, d.state, d.producer_id, d.producer_epoch) == (NONE, "Ongoing", pid, epoch)
    assert d.transaction_timeout_ms == 60_000
    listed = h.coordinator.list_transactions()
    assert {(t.transactional_id, t.state) for t in listed.transactions} == {
        ("tx", "Ongoing"),
        ("other", "Empty"),
    }
    only = h.coordinator.list_transactions(states=["Ongoing", "Bogus"])
    assert [t.transactional_id for t in only.transactions] == ["tx"]
    assert only.unknown_state_filters == ("Bogus",)
    by_pid = h.coordinator.list_transactions(producer_ids=[pid])
    assert [t.transactional_id for t in by_pid.transactions] == ["tx"]
    h.clock.advance(5_000)
    running = h.coordinator.list_transactions(duration_ms=1_000).transactions
    # "other" never started a transaction (start time -1): as Kafka, every duration
    # filter lists it (the conformance probe kip664.list-duration-filter).
    assert sorted(t.transactional_id for t in running) == ["other", "tx"]
    recent = h.coordinator.list_transactions(duration_ms=60_000).transactions
    assert [t.transactional_id for t in recent] == ["other"]
    assert h.coordinator.describe("missing").error == 105
    assert h.coordinator.describe("").error == INVALID_REQUEST
