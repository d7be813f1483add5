"""The transaction state machine: the transition table, the metadata's prepare/apply
steps, and (hypothesis) random operation sequences against the real coordinator."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    NONE,
    NOT_LEADER,
    FakeClock,
    FakePids,
    FakeTransport,
    Harness,
)
from txnchaos.cluster.coordinator.transactions import (
    IllegalTransition,
    TransactionMetadata,
    TxnState,
    check_transition,
)
from txnchaos.cluster.coordinator.transactions.metadata import EpochError, TxnTransit
from txnchaos.cluster.coordinator.transactions.state import RESTING_STATES, VALID_PREVIOUS

S = TxnState

KAFKA_TABLE = {
    # target: valid previous states (Kafka 4.x TransactionState; Empty/Complete* ->
    # PrepareAbort is a TV2 abort of a transaction that added nothing)
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "PrepareEpochFence", "Empty", "CompleteCommit", "CompleteAbort"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteAbort", "CompleteCommit"},
    "PrepareEpochFence": {"Ongoing"},
}


def test_transition_table_is_kafkas() -> None:
    got = {t.value: {s.value for s in prev} for t, prev in VALID_PREVIOUS.items()}
    assert got == KAFKA_TABLE
    assert [s.id for s in S] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert S.from_id(7) is S.PREPARE_EPOCH_FENCE
    assert S.from_name("PrepareCommit") is S.PREPARE_COMMIT


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_check_transition_raises_exactly_for_illegal_pairs(source: S, target: S) -> None:
    legal = source.value in KAFKA_TABLE[target.value]
    if legal:
        check_transition(source, target)
    else:
        with pytest.raises(IllegalTransition):
            check_transition(source, target)


def md(state: S = S.EMPTY, epoch: int = 3, last_epoch: int = -1) -> TransactionMetadata:
    m = TransactionMetadata("tx", 10, producer_epoch=epoch, last_producer_epoch=last_epoch)
    m.state = state
    return m


def test_prepare_does_not_mutate_and_apply_does() -> None:
    m = md()
    before = m.snapshot()
    t = m.prepare_add_partitions([("t1", 0)], 5000)
    assert m.snapshot() == before
    assert (t.state, t.partitions, t.txn_start_ms) == (S.ONGOING, {("t1", 0)}, 5000)
    m.apply(t)
    assert m.snapshot() == t
    # more partitions keep the start time
    m.apply(m.prepare_add_partitions([("t1", 1)], 6000))
    assert m.txn_start_ms == 5000 and m.partitions == {("t1", 0), ("t1", 1)}


def test_illegal_prepares_raise() -> None:
    with pytest.raises(IllegalTransition):
        md(S.EMPTY).prepare_end(True, 1)
    with pytest.raises(IllegalTransition):
        md(S.PREPARE_COMMIT).prepare_add_partitions([("t1", 0)], 1)
    with pytest.raises(IllegalTransition):
        md(S.COMPLETE_COMMIT).prepare_fence_and_abort(1)
    with pytest.raises(IllegalTransition):
        md(S.ONGOING).prepare_dead()
    with pytest.raises(RuntimeError):
        md(S.ONGOING).prepare_complete(1)
    m = md(S.EMPTY)
    with pytest.raises(IllegalTransition):
        m.apply(TxnTransit(S.COMPLETE_ABORT, 10, -1, 3, -1, 1, frozenset(), -1, 1))


def test_fence_bumps_epoch_and_forgets_last_epoch() -> None:
    m = md(S.ONGOING, epoch=4, last_epoch=3)
    t = m.prepare_fence_and_abort(9)
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.PREPARE_ABORT, 5, -1)


def test_tv2_fence_bumps_once_and_keeps_the_fenced_epoch() -> None:
    """Kafka 4.x: a coordinator's abort under TV2 bumps once (the end's bump), keeping the
    fenced epoch as the last one, so the fenced producer's InitProducerId(id, epoch) is a
    KIP-360 recovery answered with that one epoch."""
    m = md(S.ONGOING, epoch=4, last_epoch=3)
    t = m.prepare_fence_and_abort(9, transaction_version=2)
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.PREPARE_ABORT, 5, 4)
    m.apply(t)
    m.apply(m.prepare_complete(10))
    again = m.prepare_increment_epoch(100, 4, 11)
    assert (again.producer_epoch, again.last_producer_epoch, again.state) == (5, 4, S.EMPTY)


def test_increment_epoch_kip360_rules() -> None:
    m = md(S.COMPLETE_COMMIT, epoch=4, last_epoch=-1)
    # new instance: bump, no last epoch
    t = m.prepare_increment_epoch(100, None, 1)
    assert (t.producer_epoch, t.last_producer_epoch, t.state) == (5, -1, S.EMPTY)
    # KIP-360 bump from the current epoch remembers it
    t = m.prepare_increment_epoch(100, 4, 1)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    # retry of that bump returns the current epoch
    m.apply(t)
    t2 = m.prepare_increment_epoch(100, 4, 2)
    assert (t2.producer_epoch, t2.last_producer_epoch) == (5, 4)
    with pytest.raises(EpochError):
        m.prepare_increment_epoch(100, 2, 3)


# ---------------------------------------------------------------------- random sequences

IDS = st.sampled_from(["a", "b"])
PARTS = st.lists(
    st.tuples(st.sampled_from(["t1", "t2"]), st.integers(0, 1)), min_size=1, max_size=3
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("init"), IDS, st.booleans()),
        st.tuples(st.just("add"), IDS, PARTS),
        st.tuples(st.just("add"), IDS, PARTS),
        st.tuples(st.just("offsets"), IDS, st.sampled_from(["g1", "g2"])),
        st.tuples(st.just("end"), IDS, st.booleans()),
        st.tuples(st.just("end"), IDS, st.booleans()),
        st.tuples(st.just("stale"), IDS, st.booleans()),
        st.tuples(st.just("time"), st.integers(0, 90_000), st.none()),
        st.tuples(st.just("markers"), st.booleans(), st.none()),
        st.tuples(st.just("markers"), st.just(True), st.none()),
        st.tuples(st.just("restart"), st.none(), st.none()),
        st.tuples(st.just("expire"), st.none(), st.none()),
    ),
    max_size=40,
)


def check_invariants(h: Harness) -> None:
    c = h.coordinator
    for txn_id in c.transactional_ids():
        m = c.metadata(txn_id)
        assert m is not None
        assert m.state in RESTING_STATES, m.state
        assert 0 <= m.producer_epoch <= 32767
        assert m.producer_id >= 1000
        if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            assert not m.partitions
            assert m.pending_state is None
        if m.state.is_prepare:
            assert m.pending_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        if m.state == S.ONGOING:
            assert m.txn_start_ms > 0
    h.assert_log_matches_memory()


async def run_ops(data_dir: Path, ops: list[tuple[object, object, object]]) -> None:
    clock = FakeClock()
    transport = FakeTransport()
    h = Harness(
        data_dir,
        clock=clock,
        pids=FakePids(),
        transport=transport,
        max_timeout_ms=60_000,
        transactional_id_expiration_ms=200_000,
    ).start()
    known: dict[str, tuple[int, int]] = {}
    stale: dict[str, tuple[int, int]] = {}
    for op, a, b in [("init", "a", False), ("init", "b", False), *ops]:
        if op == "init":
            txn = str(a)
            expected = known.get(txn) if b else None
            pid, epoch = expected if expected else (-1, -1)
            err, got_pid, got_epoch = await h.init(txn, pid=pid, epoch=epoch, timeout_ms=30_000)
            if err == NONE:
                if txn in known:
                    stale[txn] = known[txn]
                known[txn] = (got_pid, got_epoch)
            else:
                assert err in (CONCURRENT_TRANSACTIONS, 90), err
        elif op == "add" and str(a) in known:
            pid, epoch = known[str(a)]
            parts: dict[str, list[int]] = {}
            for t, p in b:  # type: ignore[attr-defined]
                parts.setdefault(t, []).append(p)
            await h.add(pid, epoch, parts, txn_id=str(a))
        elif op == "offsets" and str(a) in known:
            pid, epoch = known[str(a)]
            await h.add_offsets(pid, epoch, str(b), txn_id=str(a))
        elif op == "end" and str(a) in known:
            pid, epoch = known[str(a)]
            await h.end(pid, epoch, bool(b), txn_id=str(a))
        elif op == "stale" and str(a) in stale:
            pid, epoch = stale[str(a)]
            if b:
                await h.end(pid, epoch, True, txn_id=str(a))
            else:
                await h.add(pid, epoch, {"t1": [0]}, txn_id=str(a))
        elif op == "time":
            clock.advance(int(a))  # type: ignore[call-overload]
            h.coordinator.abort_timed_out_transactions()
        elif op == "markers":
            if a:
                transport.script = {}
            else:  # one transient failure per partition, then success
                transport.script = {(t, p): [NOT_LEADER] for t in ("t1", "t2") for p in (0, 1)}
            await h.flush()
            clock.advance(2_000)
            await h.flush()
        elif op == "restart":
            h = h.restart()
        elif op == "expire":
            h.coordinator.remove_expired_transactional_ids()
        check_invariants(h)
    # Whatever happened, once markers flow every transaction leaves Prepare*.
    transport.script = {}
    await h.flush()
    for txn_id in h.coordinator.transactional_ids():
        m = h.coordinator.metadata(txn_id)
        assert m is not None and not m.state.is_prepare
    before = {p: h.coordinator.memory_state(p) for p in h.coordinator.loaded_partitions}
    h = h.restart()
    after = {p: h.coordinator.memory_state(p) for p in h.coordinator.loaded_partitions}
    assert before == after
    h.crash()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_operation_sequences_keep_legal_states_and_replay(ops: list) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(run_ops(Path(d), ops))
