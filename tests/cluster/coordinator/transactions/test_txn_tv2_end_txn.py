"""KIP-890 part 2 on the coordinator: EndTxn v5 (a transaction.version 2 client) bumps
the epoch at every transaction end, writes the markers with it, answers with the
producer id and epoch to use next, moves onto a new producer id at the last epoch, and
answers a retry whose response was lost with the same answer (also after a restart).
Driven through the real handlers (see ``txn_support``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
    Harness,
    async_test,
    marker_identities,
)
from txnchaos.cluster.coordinator.transactions import TransactionMetadata, TxnState
from txnchaos.cluster.coordinator.transactions.metadata import MAX_EPOCH
from txnchaos.cluster.coordinator.transactions.store import log_path
from txnchaos.cluster.storage.state_log import scan

S = TxnState
UNSUPPORTED_VERSION = 35
LAST = MAX_EPOCH - 1  # the last epoch a client may hold (32766)


async def begin(h: Harness, pid: int, epoch: int, txn_id: str = "tx") -> None:
    got = await h.add(pid, epoch, {"t1": [0], "t2": [1]}, txn_id=txn_id)
    assert set(got.values()) == {NONE}, got


async def init_at_epoch(
    h: Harness, epoch: int, *, begin_txn: bool = True
) -> tuple[int, TransactionMetadata]:
    """``Harness.init_at_epoch``, with a transaction begun at that epoch unless
    ``begin_txn`` is False."""
    pid, md = await h.init_at_epoch(epoch)
    if begin_txn:
        await begin(h, pid, epoch)
    return pid, md


def fixed_level(level: int | None) -> Callable[[], int] | None:
    """A finalized transaction.version that never changes (None: not known)."""
    return None if level is None else (lambda: level)


def persisted_values(h: Harness, txn_id: str = "tx") -> list[dict[str, object]]:
    """Every value written for ``txn_id`` to its transaction-log partition, in order."""
    p = h.coordinator.partition_for(txn_id)
    records, _ = scan(log_path(h.data_dir, p).read_bytes())
    key = json.dumps(["txn", txn_id], separators=(",", ":")).encode()
    return [json.loads(r.value) for r in records if r.key == key and r.value is not None]


@async_test
async def test_commit_bumps_epoch_and_markers_carry_it(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    await begin(h, pid, e0)
    assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)
    await h.flush()
    assert marker_identities(h.transport) == [(pid, e0 + 1, True, 2)]  # one leader: one marker
    md = h.coordinator.metadata("tx")
    assert md is not None and md.state == S.COMPLETE_COMMIT
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (pid, e0 + 1, e0)
    assert (md.last_producer_id, md.client_transaction_version) == (pid, 2)
    # The next transaction runs at the new epoch; the old one is fenced.
    assert (await h.add(pid, e0, {"t1": [0]}))[("t1", 0)] == PRODUCER_FENCED
    await begin(h, pid, e0 + 1)
    assert await h.end2(pid, e0 + 1, False) == (NONE, pid, e0 + 2)
    await h.flush()
    assert h.state() == "CompleteAbort"
    assert marker_identities(h.transport)[-1] == (pid, e0 + 2, False, 2)
    h.assert_log_matches_memory()


@async_test
async def test_retry_of_a_lost_response_gets_the_same_answer(tmp_path: Path) -> None:
    h = Harness(tmp_path, concurrent_wait_ms=0).start()
    _, pid, e0 = await h.init()
    await begin(h, pid, e0)
    assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)
    # Markers still in flight: Kafka's CONCURRENT_TRANSACTIONS, the client retries.
    assert await h.end2(pid, e0, True) == (CONCURRENT_TRANSACTIONS, -1, -1)
    assert await h.end2(pid, e0, False) == (INVALID_TXN_STATE, -1, -1)
    await h.flush()
    assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)
    # The other outcome is not a retry of this one.
    assert await h.end2(pid, e0, False) == (INVALID_TXN_STATE, -1, -1)
    markers = len(h.transport.requests)
    # ... and survives a coordinator restart (epoch and previous id are persisted).
    h = h.restart()
    assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)
    assert len(h.transport.requests) == markers  # nothing re-sent
    h.assert_log_matches_memory()


@async_test
async def test_stale_and_foreign_requests(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    await h.init()  # a second instance: e0 + 1
    e1 = e0 + 1
    await begin(h, pid, e1)
    assert await h.end2(pid, e0, True) == (PRODUCER_FENCED, -1, -1)  # the zombie
    assert await h.end2(pid + 1, e1, True) == (INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert await h.end2(pid, e1 + 1, True) == (PRODUCER_FENCED, -1, -1)  # from the future
    assert await h.end2(pid, e1, True, txn_id="nobody") == (INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert await h.end2(pid, e1, True) == (NONE, pid, e1 + 1)
    await h.flush()
    # After the end, the zombie's epoch e0 is neither current nor a retry (e1 + 1 - 1).
    assert await h.end2(pid, e0, True) == (PRODUCER_FENCED, -1, -1)
    # v4 is a TV0/TV1 client: strict epoch equality, no ids in the answer.
    assert await h.end2(pid, e1, True, version=4) == (PRODUCER_FENCED, -1, -1)
    assert await h.end2(pid, e1 + 1, True, version=4) == (NONE, -1, -1)


@async_test
async def test_abort_with_nothing_added_bumps_the_epoch(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    assert h.state() == "Empty"
    assert await h.end2(pid, e0, True) == (INVALID_TXN_STATE, -1, -1)  # nothing to commit
    assert await h.end2(pid, e0 - 1 if e0 else 5, False) == (PRODUCER_FENCED, -1, -1)
    assert await h.end2(pid, e0, False) == (NONE, pid, e0 + 1)
    assert h.state() == "CompleteAbort"  # no partitions: complete at once, no markers
    assert h.transport.requests == []
    assert await h.end2(pid, e0, False) == (NONE, pid, e0 + 1)  # retry
    assert await h.end2(pid, e0 + 1, False) == (NONE, pid, e0 + 2)  # a new empty abort
    assert await h.end2(pid, e0 + 2, True) == (INVALID_TXN_STATE, -1, -1)
    # CompleteCommit, then an abort at the current epoch: a new (empty) transaction.
    await begin(h, pid, e0 + 2)
    assert await h.end2(pid, e0 + 2, True) == (NONE, pid, e0 + 3)
    await h.flush()
    assert await h.end2(pid, e0 + 3, False) == (NONE, pid, e0 + 4)
    assert h.state() == "CompleteAbort"
    h.assert_log_matches_memory()


@async_test
async def test_epoch_overflow_moves_onto_a_new_producer_id(tmp_path: Path) -> None:
    h = Harness(tmp_path, concurrent_wait_ms=0).start()
    pid, md = await init_at_epoch(h, LAST)
    err, new_pid, epoch = await h.end2(pid, LAST, True)
    assert err == NONE and new_pid not in (pid, -1) and epoch == 0
    assert (md.state, md.producer_id, md.producer_epoch) == (S.PREPARE_COMMIT, pid, MAX_EPOCH)
    assert md.next_producer_id == new_pid
    # Before the markers are written the retry waits; the old identity is not fenced.
    assert await h.end2(pid, LAST, True) == (CONCURRENT_TRANSACTIONS, -1, -1)
    await h.flush()
    # The markers close the transaction of the old id at the reserved epoch.
    assert set(marker_identities(h.transport)) == {(pid, MAX_EPOCH, True, 2)}
    assert (md.state, md.producer_id, md.producer_epoch) == (S.COMPLETE_COMMIT, new_pid, 0)
    assert (md.last_producer_id, md.last_producer_epoch, md.next_producer_id) == (pid, LAST, -1)
    assert h.coordinator.counters.producer_id_rotations == 1
    # The retry of the lost answer gets the same answer, before and after a restart.
    assert await h.end2(pid, LAST, True) == (NONE, new_pid, 0)
    assert await h.end2(pid, LAST, False) == (INVALID_TXN_STATE, -1, -1)
    h = h.restart()
    assert await h.end2(pid, LAST, True) == (NONE, new_pid, 0)
    # The old producer id is gone at any other epoch; the new one works.
    assert await h.end2(pid, 5, True) == (INVALID_PRODUCER_ID_MAPPING, -1, -1)
    await begin(h, new_pid, 0)
    assert await h.end2(new_pid, 0, True) == (NONE, new_pid, 1)
    h.assert_log_matches_memory()


@async_test
async def test_overflow_survives_a_crash_before_the_markers(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, md = await init_at_epoch(h, LAST)
    h.transport.down = {1}  # the leaders of t1/t2 are unreachable: markers stay pending
    err, new_pid, _ = await h.end2(pid, LAST, True)
    assert err == NONE
    last = persisted_values(h)[-1]
    assert (last["v"], last["state"], last["next_pid"], last["tv"]) == (
        1,
        "PrepareCommit",
        new_pid,
        2,
    )
    h.transport.down = set()
    h = h.restart()  # the new incarnation resumes the markers from the log
    await h.flush()
    md = h.coordinator.metadata("tx")
    assert md is not None and (md.state, md.producer_id, md.producer_epoch) == (
        S.COMPLETE_COMMIT,
        new_pid,
        0,
    )
    assert await h.end2(pid, LAST, True) == (NONE, new_pid, 0)
    assert h.pids.handed_out.count(new_pid) == 1


@async_test
async def test_abort_at_the_last_epoch_also_rotates(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, md = await init_at_epoch(h, LAST, begin_txn=False)
    err, new_pid, epoch = await h.end2(pid, LAST, False)  # nothing added
    assert err == NONE and new_pid != pid and epoch == 0
    assert (md.state, md.producer_id, md.producer_epoch) == (S.COMPLETE_ABORT, new_pid, 0)
    assert await h.end2(pid, LAST, False) == (NONE, new_pid, 0)


@async_test
async def test_timeout_of_a_tv2_transaction_fences_the_zombie(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init(timeout_ms=1_000)
    await begin(h, pid, e0)
    assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)  # the client is on TV2 now
    await h.flush()
    await begin(h, pid, e0 + 1)
    h.clock.advance(5_000)
    assert h.coordinator.abort_timed_out_transactions() == ["tx"]
    await h.flush()
    # Fenced and aborted with the one bump of a TV2 end: e0 + 2 (Kafka 4.x).
    assert marker_identities(h.transport)[-1] == (pid, e0 + 2, False, 2)
    md = h.coordinator.metadata("tx")
    assert md is not None and (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, e0 + 2)
    # The fenced producer's commit is refused; its abort reads as a retry of the
    # coordinator's; its InitProducerId(id, epoch) recovers onto that epoch (KIP-360).
    assert await h.end2(pid, e0 + 1, True) == (INVALID_TXN_STATE, -1, -1)
    assert await h.end2(pid, e0 + 1, False) == (NONE, pid, e0 + 2)
    assert await h.init(pid=pid, epoch=e0 + 1) == (NONE, pid, e0 + 2)
    assert await h.init() == (NONE, pid, e0 + 3)


@async_test
async def test_tv0_client_fence_bumps_once_at_every_level(tmp_path: Path) -> None:
    """The fence follows the cluster's version (Kafka), and bumps once under TV2 too."""
    for level, bumps in ((None, 1), (1, 1), (2, 1)):
        h = Harness(tmp_path / str(level), transaction_version=fixed_level(level)).start()
        _, pid, e0 = await h.init(timeout_ms=1_000)
        await begin(h, pid, e0)  # a TV0 client (AddPartitionsToTxn v3)
        h.clock.advance(5_000)
        assert h.coordinator.abort_timed_out_transactions() == ["tx"]
        await h.flush()
        tv = 0 if level is None else level  # (the marker says the fence's version)
        assert marker_identities(h.transport)[-1] == (pid, e0 + bumps, False, tv)
        h.crash()


@async_test
async def test_log_value_version_follows_the_cluster_level(tmp_path: Path) -> None:
    for level, version in ((None, 0), (0, 0), (1, 1), (2, 1)):
        h = Harness(tmp_path / str(level), transaction_version=fixed_level(level)).start()
        _, pid, e0 = await h.init()
        await begin(h, pid, e0)
        assert await h.end(pid, e0, True) == NONE  # a TV0 client
        await h.flush()
        values = persisted_values(h)
        assert {v.get("v", 0) for v in values} == {version}, (level, values)
        assert all(("tv" in v) == (version == 1) for v in values)
        # A TV2 client's records carry their fields; level 0 cannot (Kafka refuses them)
        written = len(persisted_values(h))
        if level == 0:
            assert (await h.end2(pid, e0, False))[0] == UNSUPPORTED_VERSION
            assert len(persisted_values(h)) == written
        else:
            assert (await h.end2(pid, e0, False))[0] == NONE
            assert persisted_values(h)[-1]["v"] == 1
        h = h.restart()
        h.assert_log_matches_memory()
        h.crash()


@async_test
async def test_init_producer_id_after_tv2_ends(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    await begin(h, pid, e0)
    assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)
    await h.flush()
    # KIP-360 bump from the epoch the EndTxn answered.
    assert await h.init(pid=pid, epoch=e0 + 1) == (NONE, pid, e0 + 2)
    # A new instance fences everything before it.
    assert await h.init() == (NONE, pid, e0 + 3)
    assert await h.end2(pid, e0 + 2, False) == (PRODUCER_FENCED, -1, -1)


@async_test
async def test_init_after_overflow_accepts_the_old_identity_as_a_retry(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    pid, _ = await init_at_epoch(h, LAST)
    _, new_pid, _ = await h.end2(pid, LAST, True)
    await h.flush()
    # The client lost the EndTxn answer and re-initialises with what it had (KIP-360):
    # the previous producer id at the last epoch is the transaction it ended.
    assert await h.init(pid=pid, epoch=LAST) == (NONE, new_pid, 0)
    assert (await h.init(pid=pid, epoch=LAST - 1))[0] == PRODUCER_FENCED


@async_test
async def test_kip360_with_a_fenced_epoch_at_the_end_of_the_epochs(tmp_path: Path) -> None:
    """A fence that used the last epochs: a KIP-360 re-init naming the fenced epoch is
    PRODUCER_FENCED (not a crash), a new instance moves onto a new producer id."""
    h = Harness(tmp_path).start()
    pid, md = await init_at_epoch(h, LAST - 1)
    assert (await h.init())[0] == CONCURRENT_TRANSACTIONS  # fence: LAST, abort
    await h.flush()
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, LAST)
    assert await h.init(pid=pid, epoch=LAST - 1) == (PRODUCER_FENCED, -1, -1)
    err, new_pid, epoch = await h.init()
    assert err == NONE and new_pid != pid and epoch == 0


@async_test
async def test_zombie_fenced_at_the_last_epoch_is_not_a_retry(tmp_path: Path) -> None:
    """A TV2 fence at the last epoch can only reach Short.MaxValue (one bump, not two):
    the zombie's EndTxn at the last epoch must still be PRODUCER_FENCED."""
    h = Harness(tmp_path).start()
    pid, md = await init_at_epoch(h, LAST - 1)
    assert await h.end2(pid, LAST - 1, True) == (NONE, pid, LAST)  # the client is on TV2
    await h.flush()
    await begin(h, pid, LAST)
    assert (await h.init())[0] == CONCURRENT_TRANSACTIONS  # another instance fences it
    await h.flush()
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, MAX_EPOCH)
    assert await h.end2(pid, LAST, False) == (PRODUCER_FENCED, -1, -1)
    err, new_pid, epoch = await h.init()
    assert err == NONE and new_pid != pid and epoch == 0


@async_test
async def test_an_end_without_a_bump_is_never_taken_for_a_retry(tmp_path: Path) -> None:
    """The stored epoch is epoch + 1 of the request, but a TV0 client ended that
    transaction (no bump): the request is a zombie's, not a retry."""
    h = Harness(tmp_path).start()
    _, pid, e0 = await h.init()
    assert await h.init() == (NONE, pid, e0 + 1)  # a new instance; e0 is a zombie now
    await begin(h, pid, e0 + 1)
    assert await h.end(pid, e0 + 1, True) == NONE  # TV0 (EndTxn v3): no bump
    await h.flush()
    assert await h.end2(pid, e0, True) == (PRODUCER_FENCED, -1, -1)
    assert await h.end2(pid, e0, False) == (PRODUCER_FENCED, -1, -1)


async def implicit_add(h: Harness, pid: int, epoch: int, partition: int = 0) -> int:
    """A broker's AddPartitionsToTxn v5 for a TV2 producer (Produce v12): add, not verify."""
    resp = await h.call(
        24,
        5,
        {
            "transactions": [
                {
                    "transactional_id": "tx",
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "verify_only": False,
                    "topics": [{"name": "t1", "partitions": [partition]}],
                }
            ]
        },
    )
    (txn,) = resp.results_by_transaction
    return int(txn.topic_results[0].results_by_partition[0].partition_error_code)


@async_test
async def test_tv2_requests_at_level_0_are_refused_and_change_nothing(tmp_path: Path) -> None:
    """Kafka at transaction.version 0 answers a TV2 add (Produce v12, TxnOffsetCommit
    v5) and EndTxn v5 with UNSUPPORTED_VERSION; from level 1 on it serves them. Here the
    id stays usable by a TV0 client afterwards (Kafka 4.4.0 leaves it pending)."""
    for level, want in ((0, UNSUPPORTED_VERSION), (1, NONE), (2, NONE)):
        h = Harness(tmp_path / str(level), transaction_version=fixed_level(level)).start()
        _, pid, e0 = await h.init()
        assert await implicit_add(h, pid, e0) == want, level
        if level == 0:
            assert h.state() == "Empty" and len(persisted_values(h)) == 1
            await begin(h, pid, e0)  # a TV0 client's AddPartitionsToTxn v3
            assert (await h.end2(pid, e0, True))[0] == UNSUPPORTED_VERSION
            assert h.state() == "Ongoing"
            assert await h.end(pid, e0, True) == NONE  # EndTxn v3 still ends it
            await h.flush()
            assert h.state() == "CompleteCommit"
            assert {v.get("v", 0) for v in persisted_values(h)} == {0}
        else:
            md = h.coordinator.metadata("tx")
            assert md is not None and md.client_transaction_version == 2
            assert await h.end2(pid, e0, True) == (NONE, pid, e0 + 1)
        h.crash()
