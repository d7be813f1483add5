"""KIP-890's four cases, each on a cluster at transaction.version 0 (with verification
off, and on), 1 and 2, driven by our own producer (harness/clients) holding requests
instead of timing them:

1. a Produce delayed past its transaction's abort;
2. a Produce of transaction N delayed past transaction N+1's AddPartitionsToTxn;
3. an EndTxn of transaction N delayed into transaction N+1;
4. a client that writes without AddPartitionsToTxn (``Misbehavior(add_partitions="never")``).

What the seed predicts, and what is asserted:

* TV0 with ``transaction.partition.verification.enable=false`` (no defense: a cluster
  from before KIP-890, Kafka < 3.6, or the setting off): 1 and 4 leave a hanging
  transaction (the partition's LSO stays at the late record, DescribeProducers shows it
  open, the coordinator knows nothing of it, and a later transaction's commit stays
  invisible to read_committed); 2 puts the aborted transaction's record into the next
  one, and 3 commits the next transaction behind the client's back (aborted data visible
  to read_committed: EOS violations).
* TV0 and TV1 with verification on (its default; part 1, verification of old clients,
  which Kafka governs by the setting alone, at every level): 1 and 4 are refused; 2 and 3
  are not closed
  ("for older clients, we may include a record from the previous transaction ... This issue
  can only be avoided with the new clients through the epoch bump").
* TV2 (part 2, our client speaks Produce v12 / EndTxn v5): every transaction has its own
  epoch, so the late Produce (1, 2) and the late EndTxn (3) carry a fenced epoch and are
  refused with a fencing error; 4 cannot happen
  (the broker adds the partition itself), and an old-protocol client making the same
  mistake on the TV2 cluster is refused by verification.

The refusal of an old client's write: INVALID_TXN_STATE for Produce <= v10 (the seed); our
client's old protocol sends Produce v11, which knows TRANSACTION_ABORTABLE, and Kafka
(``produceRequestVersionToTransactionSupportedOperation``) answers that instead.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txnchaos.analysis.model.facts import RunFacts
from txnchaos.analysis.model.indexes import Indexes
from txnchaos.analysis.rules import hanging_transactions
from txnchaos.cluster.net.client import PeerConnection
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.harness.capture.final_state import capture_final_state
from txnchaos.harness.clients import AbortableError, Misbehavior, Producer, ProducerConfig
from txnchaos.harness.clients.producer import HeldRequest
from txnchaos.harness.launch.local import LocalCluster

from .raw_client import address
from .txn_clients_support import (
    WAIT_S,
    committed_values,
    create_topic,
    offsets,
    txn_cluster,
    txn_producer,
    uncommitted_values,
    unique,
)

pytestmark = pytest.mark.integration

INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120
FENCED = {INVALID_PRODUCER_EPOCH, PRODUCER_FENCED}
TIMEOUT_S = 30.0


class Tv:
    """A running cluster at one transaction.version, and ways to look into it."""

    def __init__(self, level: int, cluster: LocalCluster, verified: bool = True) -> None:
        self.level = level
        self.verified = verified  # transaction.partition.verification.enable
        self.cluster = cluster
        self.bootstrap = str(cluster.state()["bootstrap"])

    async def request(
        self, api_key: int, version: int, at: tuple[str, int] | None = None, **fields: Any
    ) -> Any:
        """One request to ``at`` (default: the bootstrap node, the only broker)."""
        host, port = at or address(self.bootstrap)
        conn = PeerConnection(host, port, client_id="seed-cases")
        try:
            return await conn.request(make(request_class(api_key, version), None, **fields), 30)
        finally:
            await conn.close()

    async def coordinator(self, txn_id: str) -> tuple[str, int]:
        r = await self.request(10, 3, key=txn_id, key_type=1)
        assert int(r.error_code) == 0, r
        return str(r.host), int(r.port)

    def topic(self, case: str) -> str:
        name = unique(f"seed-{case}-tv{self.level}")
        create_topic(self.bootstrap, name, 2)
        return name

    def producer(self, txn_id: str, **extra: Any) -> Producer:
        return Producer(
            ProducerConfig(
                self.bootstrap, client_id=f"seed-tv{self.level}", transactional_id=txn_id, **extra
            )
        )

    async def txn_state(self, txn_id: str) -> str:
        """The coordinator's state of ``txn_id`` (ListTransactions)."""
        at = await self.coordinator(txn_id)
        r = await self.request(66, 0, at, state_filters=[], producer_id_filters=[])
        return next(
            (t.transaction_state for t in r.transaction_states if t.transactional_id == txn_id),
            "Unknown",
        )

    async def wait_state(self, txn_id: str, *states: str) -> None:
        """Poll (bounded) until the coordinator has ``txn_id`` in one of ``states``."""
        for _ in range(int(WAIT_S / 0.05)):
            if await self.txn_state(txn_id) in states:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{txn_id} never reached {states}: {await self.txn_state(txn_id)}")

    def open_txns(self, topic: str, partition: int) -> dict[int, int]:
        """DescribeProducers: producer id -> first offset of its open transaction there."""
        r = asyncio.run(
            self.request(61, 0, topics=[{"name": topic, "partition_indexes": [partition]}])
        )
        p = r.topics[0].partitions[0]
        assert int(p.error_code) == 0, p
        return {
            s.producer_id: s.current_txn_start_offset
            for s in p.active_producers
            if s.current_txn_start_offset >= 0
        }

    def lso_and_hw(self, topic: str, partition: int) -> tuple[int, int]:
        """(last stable offset, high watermark), as confluent-kafka consumers see them."""
        lso = offsets(self.bootstrap, topic, partition, "read_committed")[1]
        hw = offsets(self.bootstrap, topic, partition, "read_uncommitted")[1]
        return lso, hw

    def witness_commit(self, topic: str, partition: int, value: bytes) -> None:
        """Another producer (confluent-kafka) commits ``value`` to the partition: a
        transaction read_committed readers must see once it is committed."""
        witness_id = unique("witness")
        w = txn_producer(self.bootstrap, witness_id)
        w.init_transactions(TIMEOUT_S)
        w.begin_transaction()
        w.produce(topic, value, partition=partition)
        w.commit_transaction(TIMEOUT_S)
        asyncio.run(self.wait_state(witness_id, "CompleteCommit"))  # its markers are written

    def hanging_checker(self, topic: str, partition: int) -> set[str]:
        """The kinds of anomaly the harness's hanging-transactions checker (the reference
        one, analysis/reference/hanging.py) finds in the final state the harness captures
        (harness/capture/final_state.py) for this partition."""
        lso, hw = self.lso_and_hw(topic, partition)
        part = {"topic": topic, "partition": partition, "lso": lso, "high_watermark": hw}
        with tempfile.TemporaryDirectory() as run_dir:
            state = capture_final_state(Path(run_dir), self.bootstrap, [part])
        judged = hanging_transactions.rule(Indexes([]), RunFacts(final_state=state))
        assert judged.unknown is None, judged.unknown
        return {r["kind"] for r in judged.rows}

    def assert_stable(self, topic: str, partition: int) -> None:
        """Nothing hangs: no open transaction, LSO = high watermark, the checker is quiet."""
        assert self.open_txns(topic, partition) == {}
        lso, hw = self.lso_and_hw(topic, partition)
        assert lso == hw, (lso, hw)
        assert self.hanging_checker(topic, partition) == set()

    def assert_hanging(self, topic: str, partition: int, pid: int, at: int, txn_id: str) -> None:
        """A hanging transaction of ``pid`` from offset ``at``: open on the partition, not
        open on the coordinator, and the LSO held there (a later commit does not move it)."""
        assert self.open_txns(topic, partition) == {pid: at}
        assert asyncio.run(self.txn_state(txn_id)) not in (
            "Ongoing",
            "PrepareCommit",
            "PrepareAbort",
        )
        lso, hw = self.lso_and_hw(topic, partition)
        assert lso == at < hw, (lso, at, hw)
        # the LSO behind the high watermark, and an open transaction its coordinator does
        # not know ("stale_open_transaction" needs transaction.max.timeout.ms to pass)
        assert self.hanging_checker(topic, partition) == {"end_lso_lag", "coordinator_mismatch"}


@pytest.fixture(
    scope="module",
    params=[(0, False), (0, True), (1, True), (2, True)],
    ids=["tv0-unverified", "tv0", "tv1", "tv2"],
)
def tv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tv]:
    level, verified = request.param
    cluster = txn_cluster(
        tmp_path_factory.mktemp(f"seed-tv{level}"),
        brokers=1,
        extra_settings=[
            f"transaction.version={level}",
            f"transaction.partition.verification.enable={str(verified).lower()}",
        ],
    )
    try:
        yield Tv(level, cluster, verified)
    finally:
        cluster.down()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def produce_error(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].error_code)


def old_client_refusal(held: HeldRequest) -> int:
    """The error verification gives an old-protocol write (see the module docstring)."""
    version = int(type(held.entity).__version__)
    return TRANSACTION_ABORTABLE if version >= 11 else INVALID_TXN_STATE


def values(raw: list[bytes]) -> list[str]:
    return [v.decode() for v in raw]


async def started(tv: Tv, txn_id: str, **extra: Any) -> Producer:
    p = tv.producer(txn_id, **extra)
    await p.init_transactions(TIMEOUT_S)
    return p


# ------------------------------------------------------------------------- case 1


def test_produce_delayed_past_its_abort(tv: Tv) -> None:
    """Transaction N writes to partition 1, holds its first write to partition 0, aborts;
    once the abort is complete the held Produce arrives."""
    topic, txn_id = tv.topic("late-abort"), unique("late-abort")

    async def main() -> tuple[int, int, int, int]:
        p = await started(tv, txn_id)
        await p.begin_transaction()
        assert p.transaction_version == tv.level
        p.send(topic, 1, b"N-1")
        await p.flush(TIMEOUT_S)
        held = await p.hold_produce(topic, 0, [(None, b"N-late")])
        await p.abort_transaction(TIMEOUT_S)
        await tv.wait_state(txn_id, "CompleteAbort")
        part = (await held.send()).responses[0].partition_responses[0]
        pid = p.ids.producer_id
        await p.close()
        return int(part.error_code), int(part.base_offset), old_client_refusal(held), pid

    code, at, refusal, pid = run(main())
    print(f"observed case1 tv{tv.level}: held Produce -> {code}")
    tv.witness_commit(topic, 0, b"witness")
    if not tv.verified:  # no defense: the late write opens a transaction nobody will end
        assert code == 0
        tv.assert_hanging(topic, 0, pid, at, txn_id)
        assert committed_values(tv.bootstrap, topic, [0]) == []  # the witness is stuck behind
        assert values(uncommitted_values(tv.bootstrap, topic, [0])) == ["N-late", "witness"]
    else:
        # TV0/1: verification finds no ongoing transaction; TV2: the abort bumped the epoch.
        if tv.level < 2:
            assert code == refusal, code
        else:
            assert code in FENCED, code
        tv.assert_stable(topic, 0)
        assert values(committed_values(tv.bootstrap, topic, [0])) == ["witness"]


# ------------------------------------------------------------------------- case 2


def test_produce_delayed_past_the_next_add_partitions(tv: Tv) -> None:
    """Transaction N writes "N-0" to partition 0 and holds its next write there; N aborts;
    N+1 adds partition 0 (TV0/1: AddPartitionsToTxn; TV2: its first Produce v12), then the
    held Produce of N arrives, then N+1 writes and commits."""
    topic, txn_id = tv.topic("late-next"), unique("late-next")

    async def main() -> int:
        p = await started(tv, txn_id)
        await p.begin_transaction()
        await p.send(topic, 0, b"N-0")
        held = await p.hold_produce(topic, 0, [(None, b"N-late")])
        await p.abort_transaction(TIMEOUT_S)
        await tv.wait_state(txn_id, "CompleteAbort")

        await p.begin_transaction()
        if tv.level < 2:
            # AddPartitionsToTxn(partition 0) for N+1, without taking a sequence: the held
            # batch of N is next in sequence, as a late batch of an old client is.
            await p.hold_produce(topic, 0, [(None, b"unused")], advance_sequence=False)
            await tv.wait_state(txn_id, "Ongoing")
            code = produce_error(await held.send())
            await p.send(topic, 0, b"N+1-0")
        else:
            await p.send(topic, 0, b"N+1-0")
            code = produce_error(await held.send())
        await p.commit_transaction(TIMEOUT_S)
        await p.close()
        return code

    code = run(main())
    committed = values(committed_values(tv.bootstrap, topic, [0]))
    print(f"observed case2 tv{tv.level}: held Produce -> {code}; committed {committed}")
    tv.assert_stable(topic, 0)
    if tv.level < 2:  # the aborted transaction's record is committed with N+1
        assert code == 0
        assert committed == ["N-late", "N+1-0"]
    else:
        # Refused, not written: the stale epoch is fenced (the epoch check comes before the
        # rule that a new transaction starts at sequence 0, which would say "retry").
        assert code in FENCED, code
        assert committed == ["N+1-0"]


# ------------------------------------------------------------------------- case 3


def test_end_txn_delayed_into_the_next_transaction(tv: Tv) -> None:
    """Transaction N's EndTxn(commit) is held (a first attempt whose answer was lost); N
    commits with a second attempt; N+1 writes, then the held EndTxn arrives; the client
    then aborts N+1."""
    topic, txn_id = tv.topic("late-end"), unique("late-end")

    async def main() -> tuple[int, str, str | None]:
        p = await started(tv, txn_id)
        await p.begin_transaction()
        await p.send(topic, 0, b"N-0")
        held = await p.hold_end_txn(commit=True)
        await p.commit_transaction(TIMEOUT_S)
        await tv.wait_state(txn_id, "CompleteCommit")

        await p.begin_transaction()
        await p.send(topic, 0, b"N+1-0")
        code = int((await held.send()).error_code)
        state = await tv.txn_state(txn_id)
        abort_error: str | None = None
        try:
            await p.abort_transaction(TIMEOUT_S)
        except Exception as exc:  # which error the client gets is reported
            abort_error = f"{type(exc).__name__}: {exc}"
        await p.close()
        return code, state, abort_error

    code, state, abort_error = run(main())
    committed = values(committed_values(tv.bootstrap, topic, [0]))
    print(
        f"observed case3 tv{tv.level}: held EndTxn -> {code}, state {state}, "
        f"client abort -> {abort_error}; committed {committed}"
    )
    tv.assert_stable(topic, 0)
    if tv.level < 2:  # the stale EndTxn completes N+1: the client's abort comes too late
        assert code == 0
        assert state in ("PrepareCommit", "CompleteCommit"), state
        assert abort_error is not None
        assert committed == ["N-0", "N+1-0"]
    else:
        assert code in FENCED, code
        assert state == "Ongoing", state
        assert abort_error is None, abort_error
        assert committed == ["N-0"]


# ------------------------------------------------------------------------- case 4


Outcome = tuple[int, int, int, int, str | None]


def _write_without_adding(tv: Tv, topic: str, txn_id: str, version: int | None) -> Outcome:
    """Our producer, never sending AddPartitionsToTxn, writes "bug-0" to partition 0 and
    commits (or aborts, when told to). (protocol, write error, offset, producer id, what
    the end of the transaction raised)."""

    async def main() -> Outcome:
        p = await started(
            tv,
            txn_id,
            transaction_version=version,
            misbehavior=Misbehavior(add_partitions="never"),
        )
        await p.begin_transaction()
        tvn = p.transaction_version
        code, offset = 0, -1
        try:
            offset = (await p.send(topic, 0, b"bug-0")).offset
        except AbortableError as exc:
            code = exc.code or -1
        end_error: str | None = None
        try:
            await p.commit_transaction(TIMEOUT_S)
        except Exception as exc:  # which error the client gets is reported
            end_error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, AbortableError):
                try:
                    await p.abort_transaction(TIMEOUT_S)
                except Exception as again:
                    end_error += f"; abort: {type(again).__name__}: {again}"
        pid = p.ids.producer_id
        await p.close()
        return tvn, code, offset, pid, end_error

    outcome: Outcome = run(main())
    return outcome


def test_write_before_add_partitions(tv: Tv) -> None:
    """Our producer never sends AddPartitionsToTxn (TV0/1). On the TV2 cluster it speaks
    the new protocol, where the broker adds the partition, so the same client is correct;
    there the same client forced to the old protocol is refused (verification at TV >= 1)."""
    topic, txn_id = tv.topic("never-added"), unique("never-added")
    tvn, code, offset, pid, end_error = _write_without_adding(tv, topic, txn_id, None)
    print(f"observed case4 tv{tv.level}: write -> {code}, end -> {end_error}")
    assert tvn == tv.level
    if not tv.verified:  # written, and no coordinator will ever end it
        assert code == 0
        tv.witness_commit(topic, 0, b"witness")
        tv.assert_hanging(topic, 0, pid, offset, txn_id)
        assert committed_values(tv.bootstrap, topic, [0]) == []
        assert values(uncommitted_values(tv.bootstrap, topic, [0])) == ["bug-0", "witness"]
        return
    if tv.level < 2:
        assert code == TRANSACTION_ABORTABLE, (code, end_error)  # Produce v11
        expected = ["witness"]
    else:
        assert (code, end_error) == (0, None)
        expected = ["bug-0", "witness"]
        old_topic, old_id = tv.topic("never-added-old"), unique("never-added-old")
        old = _write_without_adding(tv, old_topic, old_id, 1)
        assert old[:2] == (1, TRANSACTION_ABORTABLE), old
        tv.witness_commit(old_topic, 0, b"witness")
        tv.assert_stable(old_topic, 0)
        assert values(committed_values(tv.bootstrap, old_topic, [0])) == ["witness"]
    tv.witness_commit(topic, 0, b"witness")
    tv.assert_stable(topic, 0)
    assert values(committed_values(tv.bootstrap, topic, [0])) == expected
