"""KIP-939 two-phase commit: the client's PreparedTxnState, and the coordinator's
InitProducerId v6 (Enable2Pc, KeepPreparedTxn), the kept transaction's two identities,
their persistence, and the timeout exemption."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    INIT,
    INVALID_PRODUCER_ID_MAPPING,
    NONE,
    PRODUCER_FENCED,
    Harness,
    async_test,
    marker_identities,
)
from txnchaos.cluster.bugs import BugSwitches
from txnchaos.cluster.coordinator.transactions import TransactionMetadata, TxnState
from txnchaos.cluster.coordinator.transactions.metadata import MAX_EPOCH, TWO_PC_TIMEOUT_MS
from txnchaos.cluster.metrics import TransactionOpenTimeGauge
from txnchaos.harness.clients import PreparedTxnState, Producer, ProducerConfig, StateError
from txnchaos.harness.clients.errors import INVALID_TXN_STATE, UnsupportedError
from txnchaos.harness.clients.txn_state import TxnState as ClientTxnState

S = TxnState
UNSUPPORTED_VERSION = 35
LAST = MAX_EPOCH - 1  # the last epoch a client may hold
TXN_ID_AUTH_FAILED = 53


# ---------------------------------------------------------------------- PreparedTxnState


@given(st.integers(0, 2**63 - 1), st.integers(0, MAX_EPOCH))
def test_prepared_state_round_trips_through_its_string(pid: int, epoch: int) -> None:
    state = PreparedTxnState(pid, epoch)
    assert str(state) == f"{pid}:{epoch}"
    assert PreparedTxnState.from_string(str(state)) == state
    assert not state.is_empty


def test_empty_prepared_state_is_the_empty_string() -> None:
    assert str(PreparedTxnState()) == ""
    assert PreparedTxnState().is_empty
    assert PreparedTxnState.from_string("") == PreparedTxnState()


@pytest.mark.parametrize("garbage", ["x", "1", "1:", ":2", "1:2:3", "-5:1", "1:-1", "1:40000"])
def test_garbage_prepared_state_is_a_clear_error(garbage: str) -> None:
    with pytest.raises(ValueError, match="not a prepared transaction state"):
        PreparedTxnState.from_string(garbage)


# ---------------------------------------------------------------------- coordinator


async def init6(
    h: Harness,
    *,
    two_pc: bool = True,
    keep: bool = False,
    timeout_ms: int = 60_000,
    txn_id: str = "tx",
) -> tuple[int, int, int, int, int]:
    """InitProducerId v6: (error, producer id, epoch, ongoing producer id, ongoing epoch)."""
    r: Any = await h.call(
        INIT,
        6,
        {
            "transactional_id": txn_id,
            "transaction_timeout": timeout_ms,
            "enable2_pc": two_pc,
            "keep_prepared_txn": keep,
        },
    )
    return (
        int(r.error_code),
        r.producer_id,
        r.producer_epoch,
        r.ongoing_txn_producer_id,
        r.ongoing_txn_producer_epoch,
    )


def two_pc_harness(tmp_path: Path, **config: Any) -> Harness:
    return Harness(tmp_path, two_phase_commit_enable=True, **config).start()


@async_test
async def test_two_phase_commit_is_refused_while_the_broker_setting_is_off(tmp_path: Path) -> None:
    h = Harness(tmp_path).start()
    assert (await init6(h))[0] == TXN_ID_AUTH_FAILED
    assert h.coordinator.metadata("tx") is None
    # Keep-prepared without 2PC is allowed (KIP-939, "Disallowing keepPreparedTxn=true").
    assert (await init6(h, two_pc=False, keep=True))[0] == NONE


@async_test
async def test_two_phase_producer_has_no_timeout(tmp_path: Path) -> None:
    h = two_pc_harness(tmp_path, max_timeout_ms=1_000)
    err, pid, epoch, ongoing_pid, ongoing_epoch = await init6(h, timeout_ms=10**9)
    assert (err, ongoing_pid, ongoing_epoch) == (NONE, -1, -1)
    assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NONE}
    md = h.coordinator.metadata("tx")
    assert md is not None and md.is_two_phase and md.txn_timeout_ms == TWO_PC_TIMEOUT_MS
    # A non-2PC transaction started at the same time times out; the 2PC one does not.
    _, other_pid, other_epoch = await h.init("plain", timeout_ms=500)
    assert await h.add(other_pid, other_epoch, {"t1": [1]}, txn_id="plain") == {("t1", 1): NONE}
    h.clock.advance(10**7)
    assert h.coordinator.abort_timed_out_transactions() == ["plain"]
    assert h.state("tx") == "Ongoing"


async def prepared_tv2(h: Harness) -> tuple[int, int]:
    """A 2PC producer on transaction.version 2 with a transaction in t1-0 left open."""
    _, pid, epoch, _, _ = await init6(h)
    await h.end2(pid, epoch, commit=False)  # one TV2 end, so the id records TV2
    await h.flush()
    epoch += 1
    assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NONE}
    return pid, epoch


@async_test
async def test_keep_prepared_keeps_the_transaction_and_fences_earlier_instances(
    tmp_path: Path,
) -> None:
    h = two_pc_harness(tmp_path)
    pid, epoch = await prepared_tv2(h)
    assert await init6(h, keep=True) == (NONE, pid, epoch + 1, pid, epoch)
    # A crash loop: every keep-prepared init bumps the new instance's epoch again.
    assert await init6(h, keep=True) == (NONE, pid, epoch + 2, pid, epoch)
    assert h.state("tx") == "Ongoing"
    h.assert_log_matches_memory()
    # Survives a coordinator restart (both identities are in the log).
    h = h.restart()
    md = h.coordinator.metadata("tx")
    assert md is not None and md.keeps_prepared and md.client_ids == (pid, epoch + 2)
    assert (md.producer_id, md.producer_epoch) == (pid, epoch)
    # Earlier instances are fenced; the latest one commits.
    assert (await h.end2(pid, epoch, commit=True))[0] == PRODUCER_FENCED
    assert (await h.end2(pid, epoch + 1, commit=True))[0] == PRODUCER_FENCED
    assert await h.end2(pid, epoch + 2, commit=True) == (NONE, pid, epoch + 3)
    await h.flush()
    assert marker_identities(h.transport)[-1] == (pid, epoch + 3, True, 2)
    assert h.state("tx") == "CompleteCommit"
    # A retry whose answer was lost gets the same answer.
    assert await h.end2(pid, epoch + 2, commit=True) == (NONE, pid, epoch + 3)
    h.assert_log_matches_memory()


@async_test
async def test_keep_prepared_then_old_protocol_end(tmp_path: Path) -> None:
    h = two_pc_harness(tmp_path)
    _, pid, epoch, _, _ = await init6(h)
    assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NONE}
    assert await init6(h, keep=True) == (NONE, pid, epoch + 1, pid, epoch)
    assert await h.end(pid, epoch, commit=False) == PRODUCER_FENCED
    assert await h.end(pid, epoch + 1, commit=False) == NONE
    await h.flush()
    # The markers carry the new instance's epoch, fencing the crashed one.
    assert marker_identities(h.transport)[-1] == (pid, epoch + 1, False, 0)
    md = h.coordinator.metadata("tx")
    assert md is not None and md.state == S.COMPLETE_ABORT
    assert (md.producer_id, md.producer_epoch, md.next_producer_epoch) == (pid, epoch + 1, -1)
    # The producer goes on with the epoch it was given.
    assert await h.add(pid, epoch + 1, {"t1": [1]}) == {("t1", 1): NONE}


@async_test
async def test_keep_prepared_at_transaction_version_0_is_unsupported(tmp_path: Path) -> None:
    """The kept transaction's NextProducerId/Epoch need a version-1 state record, which
    finalized level 0 does not write: refused as Kafka refuses a TV2 client's state there
    (UNSUPPORTED_VERSION), nothing changed."""
    for level, want in ((0, UNSUPPORTED_VERSION), (1, NONE)):
        h = Harness(
            tmp_path / str(level),
            two_phase_commit_enable=True,
            transaction_version=lambda level=level: level,  # type: ignore[misc]
        ).start()
        _, pid, epoch, _, _ = await init6(h)
        assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NONE}
        assert (await init6(h, keep=True))[0] == want
        md = h.coordinator.metadata("tx")
        assert md is not None and md.state == S.ONGOING
        assert md.client_ids == ((pid, epoch) if level == 0 else (pid, epoch + 1))
        h.crash()


@async_test
async def test_keep_prepared_with_nothing_open_is_an_ordinary_init(tmp_path: Path) -> None:
    h = two_pc_harness(tmp_path)
    _, pid, epoch, _, _ = await init6(h)
    assert await init6(h, keep=True) == (NONE, pid, epoch + 1, -1, -1)
    assert h.state("tx") == "Empty"


@async_test
async def test_force_terminate_aborts_a_kept_transaction_above_every_epoch(
    tmp_path: Path,
) -> None:
    h = two_pc_harness(tmp_path)
    pid, epoch = await prepared_tv2(h)
    await init6(h, keep=True)
    await init6(h, keep=True)  # the latest instance holds epoch + 2
    assert (await init6(h, two_pc=False))[0] == CONCURRENT_TRANSACTIONS
    md = h.coordinator.metadata("tx")
    assert md is not None and md.state == S.PREPARE_ABORT and not md.keeps_prepared
    assert md.producer_epoch > epoch + 2
    await h.flush()
    assert h.state("tx") == "CompleteAbort"
    assert (await h.end2(pid, epoch + 2, commit=True))[0] != NONE
    h.assert_log_matches_memory()


def test_keep_prepared_at_exhausted_epoch_moves_the_new_instance_to_a_new_producer_id() -> None:
    md = TransactionMetadata("tx", 7, producer_epoch=MAX_EPOCH - 1, state=S.ONGOING)
    md.partitions = {("t1", 0)}
    md.client_transaction_version = 2
    md.apply(md.prepare_keep_prepared(9, 1_000, 5, two_phase_commit=True))
    assert md.client_ids == (9, 0)
    assert (md.producer_id, md.producer_epoch) == (7, MAX_EPOCH - 1)
    # The end: markers on the transaction's producer id, the client moves on to its own.
    prepare = md.prepare_end(True, 6, client_transaction_version=2)
    assert (prepare.producer_id, prepare.producer_epoch) == (7, MAX_EPOCH)
    assert (prepare.next_producer_id, prepare.next_producer_epoch) == (9, 1)
    md.apply(prepare)
    md.apply(md.prepare_complete(7))
    assert (md.state, md.producer_id, md.producer_epoch) == (S.COMPLETE_COMMIT, 9, 1)


@async_test
async def test_kept_end_on_another_producer_id_is_recognised_when_retried(tmp_path: Path) -> None:
    h = two_pc_harness(tmp_path)
    pid, epoch = await prepared_tv2(h)
    md = h.coordinator.metadata("tx")
    assert md is not None
    # As if keep-prepared inits had exhausted the epochs once (moving to producer id 4242).
    md.apply(md.snapshot()._replace(next_producer_id=4242, next_producer_epoch=0))
    md.apply(md.prepare_keep_prepared(None, TWO_PC_TIMEOUT_MS, 1, two_phase_commit=True))
    assert md.client_ids == (4242, 1)
    assert (await h.end2(pid, epoch, commit=True))[0] == INVALID_PRODUCER_ID_MAPPING
    assert await h.end2(4242, 1, commit=True) == (NONE, 4242, 2)
    assert await h.end2(4242, 1, commit=True) == (CONCURRENT_TRANSACTIONS, -1, -1)
    await h.flush()
    assert marker_identities(h.transport)[-1] == (pid, epoch + 1, True, 2)
    assert await h.end2(4242, 1, commit=True) == (NONE, 4242, 2)


@async_test
async def test_kept_end_that_overflows_is_recognised_when_retried(tmp_path: Path) -> None:
    """KIP-939's walk-through: an instance on another producer id (73) at the last epoch
    commits a kept transaction (of 42); CompleteCommit moves onto a new producer id with
    PrevProducerId 73, so the instance's retry (its answer lost) gets the same answer
    (was INVALID_PRODUCER_ID_MAPPING: the transaction's producer id was kept instead)."""
    for other in (False, True):
        h = two_pc_harness(tmp_path / str(other))
        pid, _ = await prepared_tv2(h)
        md = h.coordinator.metadata("tx")
        assert md is not None
        instance = 4242 if other else pid
        md.apply(md.snapshot()._replace(next_producer_id=instance, next_producer_epoch=LAST - 1))
        md.apply(md.prepare_keep_prepared(None, TWO_PC_TIMEOUT_MS, 1, two_phase_commit=True))
        assert md.client_ids == (instance, LAST)
        err, new_pid, new_epoch = await h.end2(instance, LAST, commit=True)
        assert err == NONE and new_pid not in (pid, instance) and new_epoch == 0
        await h.flush()
        assert h.state("tx") == "CompleteCommit"
        assert await h.end2(instance, LAST, commit=True) == (NONE, new_pid, 0)
        h = h.restart()  # the answer survives a restart too
        assert await h.end2(instance, LAST, commit=True) == (NONE, new_pid, 0)
        h.assert_log_matches_memory()
        h.crash()


@async_test
async def test_active_transaction_open_time_max_shows_the_oldest_open_transaction(
    tmp_path: Path,
) -> None:
    h = two_pc_harness(tmp_path)
    gauge = TransactionOpenTimeGauge(h.coordinator.active_transaction_open_time_max_ms)

    def value() -> float:
        (family,) = gauge.collect()
        assert family.name.endswith(
            "transaction_coordinator_metrics_active_transaction_open_time_max"
        )
        return float(family.samples[0].value)

    assert value() == 0
    pid, epoch = await prepared_tv2(h)
    h.clock.advance(5_000)
    _, other_pid, other_epoch = await h.init("other")
    assert await h.add(other_pid, other_epoch, {"t2": [0]}, txn_id="other") == {("t2", 0): NONE}
    h.clock.advance(1_000)
    assert value() == 6_000  # the 2PC transaction, open for 6 s
    await h.end2(pid, epoch, commit=True)
    await h.flush()
    assert value() == 1_000


@async_test
async def test_timeout_bug_aborts_a_prepared_two_phase_transaction(tmp_path: Path) -> None:
    """``txnchaos.bug.two.phase.commit.timeout``: 2PC transactions are bounded by
    transaction.max.timeout.ms again, breaking KIP-939's promise."""
    for bug, expected in ((False, []), (True, ["tx"])):
        h = two_pc_harness(
            tmp_path / str(bug),
            max_timeout_ms=1_000,
            bugs=BugSwitches(two_phase_commit_timeout=bug),
        )
        _, pid, epoch, _, _ = await init6(h)
        assert await h.add(pid, epoch, {"t1": [0]}) == {("t1", 0): NONE}
        h.clock.advance(999)
        assert h.coordinator.abort_timed_out_transactions() == []
        h.clock.advance(2)
        assert h.coordinator.abort_timed_out_transactions() == expected
        assert (h.state() == "Ongoing") != bug
        h.crash()


@async_test
async def test_init_bug_aborts_the_transaction_it_was_asked_to_keep(tmp_path: Path) -> None:
    """``txnchaos.bug.init.aborts.prepared.transaction``: a keep-prepared InitProducerId
    fences and aborts the open transaction like an ordinary one; the retried init then
    reports nothing kept."""
    h = two_pc_harness(tmp_path, bugs=BugSwitches(init_aborts_prepared_transaction=True))
    pid, epoch = await prepared_tv2(h)
    assert (await init6(h, keep=True))[0] == CONCURRENT_TRANSACTIONS
    await h.flush()
    assert h.state("tx") == "CompleteAbort"
    err, new_pid, new_epoch, ongoing_pid, ongoing_epoch = await init6(h, keep=True)
    assert (err, ongoing_pid, ongoing_epoch) == (NONE, -1, -1)
    assert new_pid == pid and new_epoch > epoch + 1  # fenced by the abort, then bumped


# ---------------------------------------------------------------------- our producer


@async_test
async def test_producer_refuses_two_phase_calls_out_of_turn() -> None:
    plain = Producer(ProducerConfig("127.0.0.1:1", transactional_id="t"))
    with pytest.raises(StateError, match="enable_two_phase_commit"):
        await plain.prepare_transaction()
    with pytest.raises(StateError, match="needs a prepared transaction") as refused:
        await plain.complete_transaction(PreparedTxnState(1, 2))
    assert refused.value.code == INVALID_TXN_STATE  # KIP-939: nothing prepared
    # In the prepared state only commit, abort or complete may follow.
    p = Producer(ProducerConfig("127.0.0.1:1", transactional_id="t", enable_two_phase_commit=True))
    p.sm.state = ClientTxnState.PREPARED
    with pytest.raises(StateError, match="only commit_transaction, abort_transaction"):
        p.send("topic", 0, b"v")
    with pytest.raises(ValueError, match="needs a transactional_id"):
        ProducerConfig("127.0.0.1:1", enable_two_phase_commit=True)


@async_test
async def test_producer_refuses_two_phase_below_transaction_version_2() -> None:
    """KIP-939's prepared state {producer id, epoch} names one transaction only under TV2
    (an epoch per transaction): below it prepare and complete are refused, and the
    transaction can still be committed or aborted."""
    p = Producer(ProducerConfig("127.0.0.1:1", transactional_id="t", enable_two_phase_commit=True))
    for tv in (0, 1):
        p.sm.state = ClientTxnState.READY
        p.sm.new_transaction(tv)
        with pytest.raises(UnsupportedError, match=r"needs transaction\.version 2"):
            await p.prepare_transaction()
        assert p.sm.state is ClientTxnState.IN_TRANSACTION  # nothing changed
        p.sm.state = ClientTxnState.INITIALIZING  # a keep-prepared init kept one open
        p.sm.recovered_transaction(tv, open_on_coordinator=True)
        p._prepared = PreparedTxnState(5, 0)
        with pytest.raises(UnsupportedError, match=r"needs transaction\.version 2"):
            await p.complete_transaction(PreparedTxnState(5, 0))
        assert p.sm.state is ClientTxnState.PREPARED


def test_producer_config_of_two_phase() -> None:
    # KIP-939: "it would be an error to set transaction.timeout.ms" with 2PC
    with pytest.raises(ValueError, match="cannot be set with enable_two_phase_commit"):
        ProducerConfig(
            "127.0.0.1:1",
            transactional_id="t",
            enable_two_phase_commit=True,
            transaction_timeout_ms=60_000,
        )
    assert ProducerConfig("127.0.0.1:1", transactional_id="t").transaction_timeout == 60_000
