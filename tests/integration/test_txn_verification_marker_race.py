"""The marker race of KIP-890 under TV2, on the produce path, against real nodes.

Transaction N ends with markers at its bumped epoch E + 1, which is transaction N+1's
epoch. If N's marker reaches a partition while N+1's implicit add (Produce v12, the
broker asks the coordinator to add the partition) is on the wire, the marker must not
void N+1's verification: it ends N, not N+1 (``broker.verification_state``). Before
that rule the produce got INVALID_TXN_STATE.

Node 1 is the transaction coordinator (and a broker), node 2 leads the partition; the
cluster is proxied on every link (``harness.launch.local_launcher``), and two delay
rules, removed when the test decides, hold N's WriteTxnMarkers on n1->n2 and N+1's
AddPartitionsToTxn on n2->n1. Order, by conditions only: the marker is held; N+1's
add is held (so the broker has started its verification); the marker goes and N
completes (CompleteCommit); the add goes; the produce must succeed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from txnchaos.cluster.net.client import PeerConnection
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.harness.clients import Producer, ProducerConfig
from txnchaos.harness.faults.proxy.thread import FleetThread
from txnchaos.harness.launch.base import ClusterSpec
from txnchaos.harness.launch.local_launcher import LocalHandle, LocalLauncher

from .raw_client import address
from .txn_clients_support import committed_values, create_topic, partition_on, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

COORDINATOR = 1  # broker + coordinator (hosts the controller)
LEADER = 2  # broker only: leads the partition written to
HOLD_MS = 120_000  # far longer than the test; the rules are removed, not waited out
WAIT_S = 60.0


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[LocalHandle]:
    spec = ClusterSpec(brokers=2, settings=["transaction.version=2"], seed=1)
    handle = LocalLauncher().start(spec, tmp_path / "run")
    try:
        yield handle
    finally:
        handle.stop()


async def wait_for(condition: Callable[[], Any], what: str) -> None:
    """Poll a condition (bounded); the test's order never depends on time passing."""
    deadline = time.monotonic() + WAIT_S
    while not await asyncio.to_thread(condition):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def applied(fleet: FleetThread, rule_id: str) -> int:
    """How many frames the rule has taken hold of so far."""
    return int(fleet.call(fleet.fleet.rule_state, rule_id).applied)


async def request(bootstrap: str, api_key: int, version: int, **fields: Any) -> Any:
    conn = PeerConnection(*address(bootstrap), client_id="marker-race")
    try:
        return await conn.request(make(request_class(api_key, version), None, **fields), 30)
    finally:
        await conn.close()


async def txn_state(bootstrap: str, txn_id: str) -> str:
    """The coordinator's state of ``txn_id`` (ListTransactions on node 1, the only one)."""
    r = await request(bootstrap, 66, 0, state_filters=[], producer_id_filters=[])
    return next(
        (t.transaction_state for t in r.transaction_states if t.transactional_id == txn_id),
        "Unknown",
    )


def test_previous_transactions_marker_does_not_void_the_next_implicit_add(
    proxied: LocalHandle,
) -> None:
    fleet, mesh = proxied.fleet, proxied.mesh
    assert fleet is not None and mesh is not None
    bootstrap = proxied.bootstrap
    coordinator_bootstrap = "{}:{}".format(*mesh.advertised(COORDINATOR))
    topic = unique("marker-race")
    create_topic(bootstrap, topic, 2)
    partition = partition_on(bootstrap, topic, LEADER)
    txn_id = unique("race")

    async def main() -> None:
        found = await request(coordinator_bootstrap, 10, 3, key=txn_id, key_type=1)
        assert (int(found.error_code), int(found.node_id)) == (0, COORDINATOR), found
        p = Producer(ProducerConfig(bootstrap, client_id="marker-race", transactional_id=txn_id))
        await p.init_transactions(WAIT_S)
        try:
            await p.begin_transaction()
            first = p.send(topic, partition, b"N")
            await p.flush()
            await first
            assert p.transaction_version == 2
            epoch_n = p.ids.epoch

            markers = fleet.add_rule(
                {
                    "kind": "delay",
                    "link": f"n{COORDINATOR}->n{LEADER}",
                    "api": "WriteTxnMarkers",
                    "ms": HOLD_MS,
                    "head_of_line": False,
                }
            )
            await p.commit_transaction(WAIT_S)  # EndTxn v5: PrepareCommit, epoch bumped
            assert p.ids.epoch == epoch_n + 1
            await wait_for(lambda: applied(fleet, markers.id) >= 1, "N's marker to be held")
            assert await txn_state(coordinator_bootstrap, txn_id) == "PrepareCommit"

            adds = fleet.add_rule(
                {
                    "kind": "delay",
                    "link": f"n{LEADER}->n{COORDINATOR}",
                    "api": "AddPartitionsToTxn",
                    "ms": HOLD_MS,
                    "head_of_line": False,
                }
            )
            await p.begin_transaction()
            second = p.send(topic, partition, b"N+1")  # Produce v12 at epoch E + 1
            # the broker started N+1's verification before asking the coordinator
            await wait_for(lambda: applied(fleet, adds.id) >= 1, "N+1's implicit add")
            assert not second.done()

            fleet.remove_rule(markers.id)  # N's marker (epoch E + 1) lands on the partition
            await wait_for(
                lambda: asyncio.run(txn_state(coordinator_bootstrap, txn_id)) == "CompleteCommit",
                "N to complete",
            )
            fleet.remove_rule(adds.id)  # the coordinator now adds the partition to N+1
            written = await asyncio.wait_for(second, WAIT_S)
            assert written.partition == partition
            await p.commit_transaction(WAIT_S)
        finally:
            await p.close(abort_open=True)

    asyncio.run(main())
    values = committed_values(bootstrap, topic, [partition], until=lambda v: len(v) >= 2)
    assert values == [b"N", b"N+1"]
