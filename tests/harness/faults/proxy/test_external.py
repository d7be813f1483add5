"""External mode: broker addresses in responses are rewritten to on-demand proxies."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.harness.faults.proxy import ProxyFleet

from .fakekafka import FakeKafka, RawClient, run


@pytest.mark.parametrize("with_rule", [False, True])
def test_external_rewrites_and_creates_proxies(tmp_path: Path, with_rule: bool) -> None:
    async def body() -> None:
        s1 = await FakeKafka(node_id=1).start()
        s2 = await FakeKafka(node_id=2).start()
        brokers = [(1, *s1.address), (2, *s2.address)]
        s1.brokers = s2.brokers = brokers
        fleet = await ProxyFleet().start()
        ext = await fleet.external([s1.address])
        if with_rule:  # frame inspection on: the rewrite happens on the captured path
            fleet.add_rule({"kind": "delay", "api": "Produce", "ms": 1})
        client = await RawClient().connect(ext.bootstrap_links[0].address)
        for version in (0, 4, 9, 12, 13):
            # all topics: an empty list in v0 (where the array is not nullable), null after
            await client.send(3, version, {"topics": [] if version == 0 else None})
            _, meta = await client.recv()
            got = {b.node_id: (b.host, b.port) for b in meta.brokers}
            assert got == {
                1: fleet.link("client->node1").address,
                2: fleet.link("client->node2").address,
            }
        await client.send(10, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
        _, fc = await client.recv()
        assert (fc.coordinators[0].host, fc.coordinators[0].port) == fleet.link(
            "client->node2"
        ).address
        await client.send(10, 2, {"key_type": 1, "key": "tx"})
        _, fc = await client.recv()
        assert (fc.host, fc.port) == fleet.link("client->node2").address
        await client.send(60, 1, {})
        _, dc = await client.recv()
        assert {b.broker_id for b in dc.brokers} == {1, 2}
        assert all((b.host, b.port) != s2.address for b in dc.brokers)
        # the same broker keeps its proxy; following the rewritten address reaches node 2
        assert set(fleet.links) == {"client->bootstrap0", "client->node1", "client->node2"}
        c2 = await RawClient().connect(fleet.link("client->node2").address)
        await c2.send(3, 12, {"topics": None})
        _, meta2 = await c2.recv()
        assert {b.port for b in meta2.brokers} == {
            fleet.link("client->node1").address[1],
            fleet.link("client->node2").address[1],
        }
        assert s2.connections == 1 and len(s2.received) == 1
        assert fleet.link("client->bootstrap0").stats.rewrites == 8
        client.close()
        c2.close()
        await fleet.close()
        await s1.close()
        await s2.close()

    run(body())
