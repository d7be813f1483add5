"""Random sequences of EndTxn (v3 and v5), InitProducerId (new instance and KIP-360),
retries of lost answers, stale requests, timeouts, marker rounds and restarts against
the real coordinator (hypothesis), checked against what a client may rely on:

* an EndTxn v5 success hands out epoch + 1 of the request (or, at the last epoch, a
  new producer id at epoch 0), and no fresh answer repeats an identity handed out
  before for that transactional id;
* a retry of the last successful EndTxn v5, with nothing else done since, gets the
  same answer once its markers are written (CONCURRENT_TRANSACTIONS before);
* a request with an identity the client no longer holds never succeeds;
* TV2 markers of one producer id carry strictly increasing epochs;
* the log replays to memory after every step and across restarts.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    NONE,
    FakeClock,
    FakePids,
    FakeTransport,
    Harness,
)
from txnchaos.cluster.coordinator.transactions import TxnState, store
from txnchaos.cluster.coordinator.transactions.metadata import MAX_EPOCH, TxnTransit
from txnchaos.cluster.coordinator.transactions.state import RESTING_STATES

LAST = MAX_EPOCH - 1
NEAR_END_PID = 500  # "a" starts three epochs before the end of its producer id
IDS = st.sampled_from(["a", "a", "b"])

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("init"), IDS, st.booleans()),
        st.tuples(st.just("add"), IDS, st.none()),
        st.tuples(st.just("add"), IDS, st.none()),
        st.tuples(st.just("end"), IDS, st.tuples(st.booleans(), st.sampled_from([3, 5, 5]))),
        st.tuples(st.just("end"), IDS, st.tuples(st.booleans(), st.just(5))),
        st.tuples(st.just("cycle"), IDS, st.booleans()),
        st.tuples(st.just("cycle"), IDS, st.booleans()),
        st.tuples(st.just("retry"), IDS, st.none()),
        st.tuples(st.just("retry"), IDS, st.none()),
        st.tuples(st.just("stale"), IDS, st.booleans()),
        st.tuples(st.just("other"), IDS, st.none()),
        st.tuples(st.just("time"), st.integers(0, 90_000), st.none()),
        st.tuples(st.just("markers"), st.none(), st.none()),
        st.tuples(st.just("markers"), st.none(), st.none()),
        st.tuples(st.just("restart"), st.none(), st.none()),
    ),
    max_size=40,
)


@dataclass
class Client:
    """What one producer instance of a transactional id believes."""

    pid: int
    epoch: int
    handed_out: set[tuple[int, int]] = field(default_factory=set)
    """Every identity the coordinator gave this transactional id."""
    stale: list[tuple[int, int]] = field(default_factory=list)
    last_end: tuple[int, int, bool, tuple[int, int]] | None = None
    """(pid, epoch, commit, answer) of the last EndTxn v5 success, while nothing else
    has changed the id since."""

    def adopt(self, pid: int, epoch: int) -> None:
        self.stale.append((self.pid, self.epoch))
        self.pid, self.epoch = pid, epoch


def seed_near_the_end(data_dir: Path, h: Harness) -> None:
    """Persist "a" as a TV2 producer id three epochs before the last one."""
    transit = TxnTransit(
        TxnState.COMPLETE_COMMIT, NEAR_END_PID, NEAR_END_PID, LAST - 3, LAST - 4, 30_000,
        frozenset(), 1, 1, client_transaction_version=2,
    )  # fmt: skip
    p = h.coordinator.partition_for("a")
    slog = store.open_log(data_dir, p, fsync=False, compact_min_bytes=1 << 30)
    slog.append(store.txn_record("a", transit))
    slog.close()


async def run(data_dir: Path, ops: list[tuple[object, object, object]]) -> None:
    clock, transport = FakeClock(), FakeTransport()
    config = {"max_timeout_ms": 60_000, "concurrent_wait_ms": 0}
    h = Harness(data_dir, clock=clock, pids=FakePids(), transport=transport, **config)
    seed_near_the_end(data_dir, h)
    h = h.start()
    clients: dict[str, Client] = {"a": Client(NEAR_END_PID, LAST - 3)}
    clients["a"].handed_out.add((NEAR_END_PID, LAST - 3))
    err, pid, epoch = await h.init("b", timeout_ms=30_000)
    assert err == NONE
    clients["b"] = Client(pid, epoch, {(pid, epoch)})

    def fresh(c: Client, pid: int, epoch: int) -> None:
        assert (pid, epoch) not in c.handed_out, ("an identity handed out twice", pid, epoch)
        assert 0 <= epoch < MAX_EPOCH
        c.handed_out.add((pid, epoch))

    for op, a, b in ops:
        txn = str(a)
        c = clients.get(txn)
        if op == "init" and c is not None:
            expected = (c.pid, c.epoch) if b else (-1, -1)
            err, pid, epoch = await h.init(
                txn, pid=expected[0], epoch=expected[1], timeout_ms=30_000
            )
            if err == NONE:
                if (pid, epoch) not in c.handed_out:
                    fresh(c, pid, epoch)
                else:  # only a KIP-360 retry may get a known identity back
                    assert b and (pid, epoch) == (c.pid, c.epoch)
                c.adopt(pid, epoch)
                c.last_end = None
        elif op == "other" and c is not None:  # another instance fences this one
            err, pid, epoch = await h.init(txn, timeout_ms=30_000)
            if err == NONE:
                fresh(c, pid, epoch)
                c.adopt(pid, epoch)
                c.last_end = None
        elif op == "add" and c is not None:
            got = await h.add(c.pid, c.epoch, {"t1": [0], "t2": [1]}, txn_id=txn)
            if set(got.values()) == {NONE}:
                c.last_end = None
        elif op in ("end", "cycle") and c is not None:
            if op == "cycle":  # a whole transaction: add, EndTxn v5, markers
                await h.add(c.pid, c.epoch, {"t1": [0]}, txn_id=txn)
            commit, version = (bool(b), 5) if op == "cycle" else b  # type: ignore[misc]
            if version == 5:
                err, pid, epoch = await h.end2(c.pid, c.epoch, commit, txn_id=txn)
                if err == NONE:
                    if (c.pid, c.epoch) != (pid, epoch - 1):
                        assert (c.epoch, epoch) == (LAST, 0) and pid != c.pid, (c, pid, epoch)
                        event("EndTxn v5 moved onto a new producer id")
                    fresh(c, pid, epoch)
                    c.last_end = (c.pid, c.epoch, commit, (pid, epoch))
                    c.adopt(pid, epoch)
                if op == "cycle":
                    await h.flush()
            else:
                md = h.coordinator.metadata(txn)
                was_open = md is not None and md.state == TxnState.ONGOING
                err = await h.end(c.pid, c.epoch, commit, txn_id=txn, version=version)
                if err == NONE and was_open:  # (on Complete* it changes nothing)
                    c.last_end = None
        elif op == "retry" and c is not None and c.last_end is not None:
            pid, epoch, commit, answer = c.last_end
            err, got_pid, got_epoch = await h.end2(pid, epoch, commit, txn_id=txn)
            md = h.coordinator.metadata(txn)
            assert md is not None
            if md.state.is_prepare:
                assert err == CONCURRENT_TRANSACTIONS
            else:
                assert (err, (got_pid, got_epoch)) == (NONE, answer)
                event("a retry got the lost answer")
        elif op == "stale" and c is not None and c.stale:
            pid, epoch = c.stale[0]
            if c.last_end is not None and (pid, epoch) == c.last_end[:2]:
                continue  # that is the retry case, not a stale request
            err, _, _ = await h.end2(pid, epoch, bool(b), txn_id=txn)
            assert err != NONE or (pid, epoch) == (c.pid, c.epoch)
            event(f"stale EndTxn answered {err}")
        elif op == "time":
            clock.advance(int(a))  # type: ignore[call-overload]
            for aborted in h.coordinator.abort_timed_out_transactions():
                clients[aborted].last_end = None
        elif op == "markers":
            await h.flush()
        elif op == "restart":
            h = h.restart()
        check_invariants_tv2(h, transport)
    await h.flush()
    for txn_id in h.coordinator.transactional_ids():
        md = h.coordinator.metadata(txn_id)
        assert md is not None and md.state in RESTING_STATES and not md.state.is_prepare
    before = {p: h.coordinator.memory_state(p) for p in h.coordinator.loaded_partitions}
    h = h.restart()
    assert before == {p: h.coordinator.memory_state(p) for p in h.coordinator.loaded_partitions}
    h.crash()


def check_invariants_tv2(h: Harness, transport: FakeTransport) -> None:
    c = h.coordinator
    for txn_id in c.transactional_ids():
        md = c.metadata(txn_id)
        assert md is not None and md.state in RESTING_STATES, txn_id
        assert 0 <= md.producer_epoch <= MAX_EPOCH
        assert md.producer_id in (NEAR_END_PID, *h.pids.handed_out)
        assert md.state.is_prepare == (md.pending_state is not None)
        if not md.state.has_open_transaction:
            assert not md.partitions and md.next_producer_id == -1
    h.assert_log_matches_memory()
    last: dict[int, int] = {}
    for _, request in transport.requests:  # in the order they were sent
        for m in request.markers:
            assert 0 <= m.producer_epoch <= MAX_EPOCH
            if m.transaction_version >= 2:
                prev = last.get(m.producer_id, -1)
                assert m.producer_epoch >= prev, (m.producer_id, prev, m.producer_epoch)
                last[m.producer_id] = m.producer_epoch


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_tv2_sequences(ops: list) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(run(Path(d), ops))
