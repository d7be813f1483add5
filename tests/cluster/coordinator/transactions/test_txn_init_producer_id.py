"""InitProducerId: new ids, fencing, KIP-360 bumps and retries, epoch overflow,
timeouts, ownership, and transactional-id expiration."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    NONE,
    NOT_COORDINATOR,
    PRODUCER_FENCED,
    FakePids,
    Harness,
    async_test,
)
from txnchaos.cluster.coordinator.transactions import InitProducerIdApi, TxnState
from txnchaos.cluster.coordinator.transactions.metadata import MAX_EPOCH

S = TxnState


@async_test
async def test_new_transactional_id_gets_fresh_producer_id(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    assert await h.init("tx") == (NONE, 1000, 0)
    assert await h.init("other") == (NONE, 1001, 0)
    assert h.state("tx") == "Empty"
    h.assert_log_matches_memory()


@async_test
async def test_null_transactional_id_is_idempotent_producer(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    assert await h.init(None) == (NONE, 1000, 0)
    assert await h.init(None, version=0) == (NONE, 1001, 0)
    assert h.coordinator.transactional_ids() == []


@async_test
async def test_null_id_served_without_transaction_coordinator() -> None:
    api = InitProducerIdApi(FakePids(), None)
    assert (await api.init(None, 1000)).producer_id == 1000
    assert (await api.init("tx", 1000)).error == NOT_COORDINATOR


@async_test
async def test_reinit_bumps_epoch_and_fences_previous_instance(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    _, pid2, e1 = await h.init()
    assert (pid2, e1) == (pid, e0 + 1)
    assert h.coordinator.counters.producers_fenced == 1
    # The old instance can no longer do anything.
    assert await h.add(pid, e0, {"t1": [0]}) == {("t1", 0): PRODUCER_FENCED}
    assert await h.add(pid, e0, {"t1": [0]}, version=1) == {("t1", 0): INVALID_PRODUCER_EPOCH}


@async_test
async def test_reinit_with_ongoing_transaction_aborts_it_first(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    assert await h.add(pid, e0, {"t1": [0, 1]}) == {("t1", 0): NONE, ("t1", 1): NONE}
    assert await h.init() == (CONCURRENT_TRANSACTIONS, -1, -1)
    md = h.coordinator.metadata("tx")
    assert md is not None and md.state == S.PREPARE_ABORT and md.producer_epoch == e0 + 1
    assert h.coordinator.counters.transactions_fenced == 1
    # Retrying while the abort markers are pending: still CONCURRENT_TRANSACTIONS.
    assert (await h.init())[0] == CONCURRENT_TRANSACTIONS
    await h.flush()
    markers = h.transport.markers()
    assert markers == [
        {
            "node": 1,
            "pid": pid,
            "epoch": e0 + 1,
            "commit": False,
            "coordinator_epoch": h.coordinator.coordinator_epoch(h.coordinator.partition_for("tx")),
            "tps": [("t1", 0), ("t1", 1)],
        }
    ]
    assert h.state() == "CompleteAbort"
    # The retry gets the epoch bumped a second time.
    assert await h.init() == (NONE, pid, e0 + 2)
    h.assert_log_matches_memory()


@async_test
async def test_kip360_bump_with_current_epoch(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    assert await h.init(pid=pid, epoch=e0) == (NONE, pid, e0 + 1)
    md = h.coordinator.metadata("tx")
    assert md is not None and md.last_producer_epoch == e0
    # A retry of the same bump (response lost) returns the current epoch, no new bump.
    assert await h.init(pid=pid, epoch=e0) == (NONE, pid, e0 + 1)
    # ... also across a coordinator restart (last epoch is persisted).
    h = h.restart()
    assert await h.init(pid=pid, epoch=e0) == (NONE, pid, e0 + 1)
    # Bumping again from the new epoch works.
    assert await h.init(pid=pid, epoch=e0 + 1) == (NONE, pid, e0 + 2)


@async_test
async def test_kip360_stale_epoch_is_fenced(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    await h.init()  # another instance: epoch e0+1, last epoch forgotten
    assert await h.init(pid=pid, epoch=e0) == (PRODUCER_FENCED, -1, -1)
    assert await h.init(pid=pid, epoch=e0, version=3) == (INVALID_PRODUCER_EPOCH, -1, -1)
    # An unknown producer id is fenced too.
    assert (await h.init(pid=pid + 77, epoch=0))[0] == PRODUCER_FENCED


@async_test
async def test_kip360_after_expiration_gets_new_producer_id(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    err, pid, epoch = await h.init("fresh", pid=555, epoch=7)
    assert err == NONE and pid != 555 and epoch == 0


@async_test
async def test_kip360_half_given_identity_is_invalid(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    assert (await h.init(pid=5, epoch=-1))[0] == INVALID_REQUEST
    assert (await h.init(pid=-1, epoch=3))[0] == INVALID_REQUEST
    assert (await h.init(""))[0] == INVALID_REQUEST


@async_test
async def test_epoch_overflow_rotates_producer_id(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, md = await h.init_at_epoch(MAX_EPOCH - 2)  # 32765: one bump left
    assert await h.init() == (NONE, pid, MAX_EPOCH - 1)
    err, new_pid, epoch = await h.init()
    assert err == NONE and new_pid != pid and epoch == 0
    assert md.last_producer_id == pid and md.last_producer_epoch == -1
    assert h.coordinator.counters.producer_id_rotations == 1


@async_test
async def test_epoch_overflow_with_kip360_retry(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, md = await h.init_at_epoch(MAX_EPOCH - 1)
    err, new_pid, epoch = await h.init(pid=pid, epoch=MAX_EPOCH - 1)
    assert err == NONE and new_pid != pid and epoch == 0
    assert (md.last_producer_id, md.last_producer_epoch) == (pid, MAX_EPOCH - 1)
    # The retry of the rotating bump (old identity, exhausted epoch) gets the new one.
    assert await h.init(pid=pid, epoch=MAX_EPOCH - 1) == (NONE, new_pid, 0)
    # The old producer id at a non-exhausted epoch is fenced.
    assert (await h.init(pid=pid, epoch=5))[0] == PRODUCER_FENCED


@async_test
async def test_fence_at_exhausted_epoch_then_rotate(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, md = await h.init_at_epoch(MAX_EPOCH - 1)
    assert (await h.add(pid, MAX_EPOCH - 1, {"t1": [0]}))[("t1", 0)] == NONE
    assert (await h.init())[0] == CONCURRENT_TRANSACTIONS
    assert md.producer_epoch == MAX_EPOCH  # the fence used the reserved epoch
    await h.flush()
    err, new_pid, epoch = await h.init()
    assert err == NONE and new_pid != pid and epoch == 0


@async_test
async def test_transaction_timeout_is_bounded(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_timeout_ms=10_000).start()
    assert (await h.init(timeout_ms=10_001))[0] == INVALID_TRANSACTION_TIMEOUT
    assert (await h.init(timeout_ms=0))[0] == INVALID_TRANSACTION_TIMEOUT
    assert (await h.init(timeout_ms=10_000))[0] == NONE


@async_test
async def test_not_owned_ids_answer_not_coordinator(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    p = h.coordinator.partition_for("tx")
    h.start([q for q in range(5) if q != p])
    assert (await h.init("tx"))[0] == NOT_COORDINATOR
    h.coordinator.load_partition(p)
    assert (await h.init("tx"))[0] == NONE
    h.coordinator.unload_partition(p)
    assert (await h.init("tx"))[0] == NOT_COORDINATOR


@async_test
async def test_coordinator_epoch_bumps_on_every_load(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    p = h.coordinator.partition_for("tx")
    first = h.coordinator.coordinator_epoch(p)
    h = h.restart()
    assert h.coordinator.coordinator_epoch(p) == (first or 0) + 1
    h.coordinator.unload_partition(p)
    h.coordinator.load_partition(p, coordinator_epoch=40)
    assert h.coordinator.coordinator_epoch(p) == 40


@async_test
async def test_idle_transactional_ids_expire(tmp_path: Path) -> None:
    h = Harness(tmp_path, transactional_id_expiration_ms=1_000).start()
    _, pid, epoch = await h.init("idle")
    await h.init("busy")
    _, bpid, bepoch = await h.init("busy")
    await h.add(bpid, bepoch, {"t1": [0]}, txn_id="busy")
    h.clock.advance(1_000)
    assert h.coordinator.remove_expired_transactional_ids() == ["idle"]
    assert h.coordinator.metadata("idle") is None
    assert h.coordinator.describe("idle").error == 105
    h = h.restart()
    assert h.coordinator.metadata("idle") is None
    assert h.coordinator.metadata("busy") is not None
    # The expired id starts over with a new producer id.
    err, new_pid, new_epoch = await h.init("idle")
    assert err == NONE and new_pid != pid and new_epoch == 0
    # Producer ids are never reused.
    assert len(set(h.pids.handed_out)) == len(h.pids.handed_out)
    _ = epoch
