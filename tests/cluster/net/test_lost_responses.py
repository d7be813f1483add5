"""A response lost on a node-to-node link (the fault proxy drops it) must not hold later
requests for the whole request timeout: the peer answers in order, so the next answer
fails the lost request at once, and the connections of the broker's verifier, the
coordinator's marker sender and a node's metadata link to the controller probe themselves
when a request stalls, so what waits behind the lost request goes out soon instead of
30 s / 10 s later."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from tests.cluster.broker.test_txn_verifier import NETWORK_EXCEPTION, Coordinator
from tests.cluster.coordinator.transactions.txn_support import async_test
from tests.cluster.net.test_peer_connection import Answers, Peer, end_txn
from txnchaos.cluster.broker.txn_verification import REQUEST_TIMEOUT_S, TxnVerifier
from txnchaos.cluster.coordinator.placement import CoordinatorPlacement
from txnchaos.cluster.coordinator.transactions.marker_sender import (
    MarkerSender,
    MarkerSpec,
    Outcome,
    PeerMarkerTransport,
)
from txnchaos.cluster.metadata_source import RemoteMetadataSource
from txnchaos.cluster.net.client import STALL_PROBE_S, PeerConnection, PeerUnavailable
from txnchaos.cluster.settings import NodeSettings
from txnchaos.harness.faults.proxy import ProxyFleet
from txnchaos.harness.launch.local import LocalCluster

LIMIT = 10.0
"""Far below the request timeouts: a wait that reaches it means the lost response held
the later requests."""
assert LIMIT < REQUEST_TIMEOUT_S
LOST_METADATA_LIMIT = 6.0
"""Below the metadata request's 10 s timeout, well above STALL_PROBE_S."""
assert STALL_PROBE_S < LOST_METADATA_LIMIT < 10.0


async def until(condition: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), LIMIT)


@asynccontextmanager
async def proxied(upstream_port: int, dropped_api: str) -> AsyncIterator[tuple[str, int]]:
    """A node-to-node link through the fault proxy that drops the first response of
    ``dropped_api``; yields the address to connect to."""
    fleet = await ProxyFleet(seed=1).start()
    try:
        link = await fleet.add_link("n1->n1001", ("127.0.0.1", upstream_port))
        fleet.add_rule({"kind": "drop_response", "api": dropped_api, "nth": 1})
        yield link.address
    finally:
        await fleet.close()


@async_test
async def test_a_later_response_fails_the_lost_request_and_the_connection_goes_on() -> None:
    peer = Peer()
    port = await peer.server.start()
    try:
        async with proxied(port, "EndTxn") as address:
            conn = PeerConnection(*address, client_id="t")
            try:
                first = asyncio.ensure_future(conn.request(end_txn(1), timeout=60))
                second = asyncio.ensure_future(conn.request(end_txn(2), timeout=60))
                answers = Answers()
                await asyncio.wait_for(asyncio.wait([first, second]), LIMIT)
                assert isinstance(first.exception(), PeerUnavailable)
                assert "later response arrived first" in str(first.exception())
                assert int(second.result().error_code) == 2
                assert conn.connected  # only the lost request failed
                assert conn.request_nowait(end_txn(3), 60, answers)
                await answers.wait_for(1)
                assert int(answers.got[0][0].error_code) == 3
            finally:
                await conn.close()
    finally:
        await peer.server.stop()


@async_test
async def test_checks_behind_a_lost_verification_response_go_out_and_complete() -> None:
    coordinator = Coordinator()
    coordinator.release.set()
    port = await coordinator.server.start()
    try:
        async with proxied(port, "AddPartitionsToTxn") as address:
            verifier = TxnVerifier(
                lambda: CoordinatorPlacement((1,)),
                lambda node: address,
                client_id="txnchaos-node-1",
                stall_probe_s=0.05,
            )
            try:
                lost = asyncio.ensure_future(verifier.verify("a", 1, 0, [("t", 0)]))
                await asyncio.wait_for(coordinator.first_arrived.wait(), LIMIT)
                # the response to "a" is dropped; "b" waits behind the unanswered request
                later = asyncio.ensure_future(verifier.verify("b", 2, 0, [("t", 0)]))
                assert await asyncio.wait_for(later, LIMIT) == {}
                assert await asyncio.wait_for(lost, LIMIT) == {("t", 0): NETWORK_EXCEPTION}
                # and the next checks go as usual
                assert await asyncio.wait_for(verifier.verify("a", 1, 0, [("t", 0)]), LIMIT) == {}
                assert len(coordinator.requests) == 3
            finally:
                await verifier.close()
    finally:
        await coordinator.server.stop()


class OneNode:
    """Marker routing: every partition is led by node 1."""

    def leader(self, topic: str, partition: int) -> int | None:
        return 1

    def exists(self, topic: str, partition: int) -> bool:
        return True

    async def refresh(self) -> None:
        return None


@async_test
async def test_markers_behind_a_lost_marker_response_go_out_and_complete() -> None:
    peer = Peer()
    port = await peer.server.start()
    done: dict[tuple[str, int], Outcome] = {}
    try:
        async with proxied(port, "WriteTxnMarkers") as address:
            sender = MarkerSender(
                PeerMarkerTransport(lambda node: address, request_timeout_s=60, stall_probe_s=0.05),
                OneNode(),
                lambda spec, tp, outcome: done.__setitem__(tp, outcome),
            )
            sender.start()
            try:
                sender.enqueue(MarkerSpec("a", 0, 10, 0, True, 1), {("t", 0)})
                await until(lambda: len(peer.markers) == 1)  # written; its answer dropped
                sender.enqueue(MarkerSpec("b", 0, 11, 0, True, 1), {("t", 1)})
                await until(lambda: len(done) == 2)
                assert done == {("t", 0): Outcome.WRITTEN, ("t", 1): Outcome.WRITTEN}
                # "b" waited behind the unanswered request; the probe's answer showed it
                # lost, and "a" went again
                sent = [[m.producer_id for m in r.markers] for r in peer.markers]
                assert sent[0] == [10] and sorted(sent[1:]) == [[10], [11]]
                assert sender.stats.request_failures == 1
            finally:
                await sender.stop()
    finally:
        await peer.server.stop()


@pytest.mark.integration
@async_test
async def test_a_lost_metadata_response_fails_its_refresh_within_the_probe(
    fresh_cluster: LocalCluster,
) -> None:
    """A node's metadata connection to the controller (a real node here) probes a stalled
    request: a dropped Metadata response fails that refresh in about STALL_PROBE_S, not the
    10 s request timeout, and the next refresh gets the view."""
    node = next(n for n in fresh_cluster.state()["nodes"] if n["id"] == 1)
    async with proxied(int(node["port"]), "Metadata") as address:
        source = RemoteMetadataSource(
            node_id=7,
            roles=frozenset({"broker"}),
            advertised_host="127.0.0.1",
            advertised_port=1,
            controller_host=address[0],
            controller_port=address[1],
            settings=NodeSettings(),
        )
        try:
            with pytest.raises(PeerUnavailable):
                await asyncio.wait_for(source.refresh(), LOST_METADATA_LIMIT)
            view = await asyncio.wait_for(source.refresh(), LOST_METADATA_LIMIT)
            assert view.cluster_id
        finally:
            await source.stop()
