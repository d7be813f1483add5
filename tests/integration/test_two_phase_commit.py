"""KIP-939 two-phase commit against real nodes: our producer prepares, "crashes" (is
dropped without ending its transaction), and a new instance completes the transaction
from the stored PreparedTxnState; read back by confluent-kafka read_committed consumers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from txnchaos.harness.clients import (
    FatalError,
    PreparedTxnState,
    Producer,
    ProducerConfig,
    StateError,
)
from txnchaos.harness.clients.connection import API_PRODUCE
from txnchaos.harness.launch.local import LocalCluster
from txnchaos.harness.transactions_tool.admin import AdminClient

from .txn_clients_support import (
    COORDINATOR_ID,
    committed_values,
    create_topic,
    txn_cluster,
    uncommitted_values,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

MAX_TIMEOUT_MS = 1_000  # transaction.max.timeout.ms: 2PC transactions are not bounded by it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = txn_cluster(
        tmp_path_factory.mktemp("two-phase"),
        brokers=1,
        extra_settings=[
            "transaction.two.phase.commit.enable=true",
            f"transaction.max.timeout.ms={MAX_TIMEOUT_MS}",
        ],
    )
    yield c
    c.down()


@pytest.fixture
def bootstrap(cluster: LocalCluster) -> str:
    return str(cluster.state()["bootstrap"])


def two_pc(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    return Producer(
        ProducerConfig(
            bootstrap,
            client_id="ours-2pc",
            transactional_id=txn_id,
            enable_two_phase_commit=True,
            **extra,
        )
    )


async def prepare(bootstrap: str, txn_id: str, topic: str, values: list[str]) -> PreparedTxnState:
    """A producer that prepares a transaction writing ``values`` and then disappears
    without ending it (its crash)."""
    p = two_pc(bootstrap, txn_id)
    await p.init_transactions(30)
    await p.begin_transaction()
    for i, v in enumerate(values):
        p.send(topic, i % 2, v.encode())
    state = await p.prepare_transaction(30)
    await p.close()  # no commit, no abort: the transaction stays open at the coordinator
    return state


async def describe_async(bootstrap: str, txn_id: str) -> Any:
    async with AdminClient(bootstrap) as admin:
        return await admin.describe_transaction(txn_id)


def describe(bootstrap: str, txn_id: str) -> Any:
    return asyncio.run(describe_async(bootstrap, txn_id))


def test_new_instance_completes_the_prepared_transaction(bootstrap: str) -> None:
    topic, txn_id = unique("2pc"), unique("2pc-tx")
    create_topic(bootstrap, topic, 2)
    first = [f"a{i}" for i in range(6)]
    stored = str(asyncio.run(prepare(bootstrap, txn_id, topic, first)))  # the database row

    async def recover_and_continue() -> PreparedTxnState:
        p = two_pc(bootstrap, txn_id)
        await p.init_transactions(30, keep_prepared_txn=True)
        assert p.ongoing_prepared_state == PreparedTxnState.from_string(stored)
        with pytest.raises(StateError, match="prepared"):
            p.send(topic, 0, b"not allowed")
        assert await p.complete_transaction(PreparedTxnState.from_string(stored), 30)
        with pytest.raises(StateError):  # nothing is prepared any more
            await p.complete_transaction(PreparedTxnState.from_string(stored), 30)
        # The recovered producer goes on: a second transaction, prepared, then it crashes.
        await p.begin_transaction()
        for i in range(4):
            p.send(topic, i % 2, f"b{i}".encode())
        second = await p.prepare_transaction(30)
        await p.close()
        return second

    second = asyncio.run(recover_and_continue())
    assert str(second) != stored

    async def recover_with_stale_state() -> bool:
        p = two_pc(bootstrap, txn_id)
        await p.init_transactions(30, keep_prepared_txn=True)
        assert p.ongoing_prepared_state == second
        # The database never recorded the second transaction: it must be aborted.
        committed = await p.complete_transaction(PreparedTxnState.from_string(stored), 30)
        await p.close()
        return committed

    assert not asyncio.run(recover_with_stale_state())

    async def recover_with_nothing_open() -> None:
        p = two_pc(bootstrap, txn_id)
        await p.init_transactions(30, keep_prepared_txn=True)
        assert p.ongoing_prepared_state.is_empty
        assert not await p.complete_transaction(PreparedTxnState(), 30)  # a no-op
        await p.close()

    asyncio.run(recover_with_nothing_open())
    assert sorted(v.decode() for v in committed_values(bootstrap, topic, range(2))) == first
    everything = {v.decode() for v in uncommitted_values(bootstrap, topic, range(2))}
    assert everything == set(first) | {f"b{i}" for i in range(4)}


def test_prepared_transaction_survives_coordinator_kill9(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic, txn_id = unique("2pc-kill"), unique("2pc-kill-tx")
    create_topic(bootstrap, topic, 2)
    values = [f"k{i}" for i in range(4)]
    state = asyncio.run(prepare(bootstrap, txn_id, topic, values))
    cluster.kill_node(COORDINATOR_ID)
    cluster.restart_node(COORDINATOR_ID)

    async def recover() -> None:
        p = two_pc(bootstrap, txn_id)
        await p.init_transactions(60, keep_prepared_txn=True)
        assert p.ongoing_prepared_state == state
        assert await p.complete_transaction(state, 30)
        await p.close()

    asyncio.run(recover())
    assert sorted(v.decode() for v in committed_values(bootstrap, topic, range(2))) == values


def test_two_phase_transaction_outlives_every_timeout(bootstrap: str) -> None:
    topic, txn_id, plain_id = unique("2pc-long"), unique("2pc-long-tx"), unique("plain-tx")
    create_topic(bootstrap, topic, 2)

    async def main() -> None:
        p = two_pc(bootstrap, txn_id)
        await p.init_transactions(30)
        await p.begin_transaction()
        p.send(topic, 0, b"long")
        await p.prepare_transaction(30)
        prepared_at = time.monotonic()
        # Past transaction.max.timeout.ms (the longest timeout any transaction may have)...
        await asyncio.to_thread(
            wait_until,
            lambda: time.monotonic() - prepared_at > 2 * MAX_TIMEOUT_MS / 1000,
            "transaction.max.timeout.ms to pass",
        )
        # ...then one with a short timeout, started later: once the coordinator has aborted
        # it, an abort pass ran while the 2PC transaction was older than any timeout the
        # cluster allows.
        plain = Producer(
            ProducerConfig(bootstrap, transactional_id=plain_id, transaction_timeout_ms=200)
        )
        await plain.init_transactions(30)
        await plain.begin_transaction()
        plain.send(topic, 1, b"timed out")
        await plain.flush(30)
        await asyncio.to_thread(
            wait_until,
            lambda: describe(bootstrap, plain_id).state in ("PrepareAbort", "CompleteAbort"),
            "the plain transaction to time out",
        )
        d = await describe_async(bootstrap, txn_id)
        assert d.state == "Ongoing"
        # Int.MaxValue: not bounded by transaction.max.timeout.ms. Kafka 4.4.0 stores and
        # describes the same value (the KIP's text says -1; its code uses Int.MaxValue).
        assert d.timeout_ms == 2**31 - 1
        await p.commit_transaction(30)
        await p.close()
        await plain.close()

    asyncio.run(main())
    assert [v.decode() for v in committed_values(bootstrap, topic, range(2))] == ["long"]


def test_force_terminate_aborts_a_prepared_transaction(bootstrap: str) -> None:
    topic, txn_id = unique("2pc-term"), unique("2pc-term-tx")
    create_topic(bootstrap, topic, 2)
    state = asyncio.run(prepare(bootstrap, txn_id, topic, ["t0", "t1"]))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "txnchaos.jobs.cli", "transactions"),
            *("force-terminate", "--bootstrap", bootstrap, "--transactional-id", txn_id, "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["terminated"] and answer["producer_id"] == state.producer_id
    assert describe(bootstrap, txn_id).state in ("CompleteAbort", "Empty")
    # The LSO moved past the aborted records: read_committed reaches the end without them.
    assert committed_values(bootstrap, topic, range(2)) == []
    assert sorted(uncommitted_values(bootstrap, topic, range(2))) == [b"t0", b"t1"]

    async def recover() -> None:
        p = two_pc(bootstrap, txn_id)
        await p.init_transactions(30, keep_prepared_txn=True)
        assert p.ongoing_prepared_state.is_empty
        await p.close()

    asyncio.run(recover())


def test_two_phase_commit_refused_when_the_cluster_disables_it(
    shared_cluster: LocalCluster,
) -> None:
    bootstrap = str(shared_cluster.state()["bootstrap"])

    async def main() -> None:
        p = two_pc(bootstrap, unique("2pc-off"))
        with pytest.raises(FatalError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
            await p.init_transactions(30)
        await p.close()
        # Keep-prepared without 2PC is allowed (KIP-939); prepare is not.
        plain = Producer(ProducerConfig(bootstrap, transactional_id=unique("keep-off")))
        await plain.init_transactions(30, keep_prepared_txn=True)
        assert plain.ongoing_prepared_state.is_empty
        await plain.complete_transaction(PreparedTxnState(), 30)
        await plain.begin_transaction()
        with pytest.raises(StateError, match="enable_two_phase_commit"):
            await plain.prepare_transaction(30)
        await plain.abort_transaction(30)
        await plain.close()

    asyncio.run(main())


def test_a_view_knowing_only_the_coordinator_still_sees_tv2(bootstrap: str) -> None:
    """A new producer whose view knows only the transaction coordinator (a node of its own,
    serving no Produce) asks the brokers whether they serve Produce v12: it took the missing
    Produce for v0 and ran the transaction at TV1 (under load, a keep-prepared recovery then
    could not complete its transaction)."""
    txn_id = unique("2pc-view")

    async def choose() -> int:
        p = two_pc(bootstrap, txn_id)
        await p.view.refresh()  # the cluster's finalized features (transaction.version 2)
        coordinator = await p.txn.coordinator()
        assert API_PRODUCE not in coordinator.versions  # a coordinator-only node
        p.view.nodes = {COORDINATOR_ID: p.view.nodes[COORDINATOR_ID]}
        try:
            return await p._choose_tv()
        finally:
            await p.close()

    assert asyncio.run(choose()) == 2
