"""The proxy against an in-test fake Kafka server: byte-exact checks of every fault."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from txnchaos.harness.faults.proxy import ProxyFleet
from txnchaos.rundir.fault_log import read_fault_log

from .conftest import FastPathHits
from .fakekafka import FakeKafka, RawClient, big_produce, eventually, produce_body, run

PRODUCE_V = 9  # flexible
END_TXN = 26


async def setup(tmp_path: Path, **kw: object) -> tuple[FakeKafka, ProxyFleet, RawClient]:
    server = await FakeKafka(**kw).start()  # type: ignore[arg-type]
    fleet = await ProxyFleet(fault_log=tmp_path / "faults.jsonl", seed=7).start()
    link = await fleet.add_link("client->n1", server.address)
    client = await RawClient().connect(link.address)
    return server, fleet, client


async def teardown(server: FakeKafka, fleet: ProxyFleet, client: RawClient) -> None:
    client.close()
    await fleet.close()
    await server.close()


def test_passthrough_is_byte_exact(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        frames = []
        for i in range(20):
            _corr, data = client.encode(0, PRODUCE_V, produce_body(f"txn-{i}", 1000 + i))
            frames.append(data)
        big_corr, big = client.encode(0, 3, big_produce(3_000_000))
        client.writer.write(b"".join(frames) + big)
        got = await server.wait_received(21)
        assert [r.frame for r in got] == [f[4:] for f in [*frames, big]]
        corrs = [(await client.recv())[0] for _ in range(21)]
        assert corrs == [*range(1, 21), big_corr]
        link = fleet.link("client->n1")
        assert link.stats.frames_captured_up == 0 and link.stats.frames_captured_down == 0
        assert link.stats.connections_total == 1
        await teardown(server, fleet, client)

    run(body())


def test_delay_on_one_transactional_id(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "delay", "api": "Produce", "transactional_id": "slow-*", "ms": 300})
        t0 = time.monotonic()
        await client.send(0, PRODUCE_V, produce_body("fast-1", 1))
        await client.recv()
        fast = time.monotonic() - t0
        t0 = time.monotonic()
        await client.send(0, PRODUCE_V, produce_body("slow-1", 2))
        await client.recv()
        slow = time.monotonic() - t0
        assert slow >= 0.3
        assert fast < slow
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "delay" and entry["link"] == "client->n1"
        assert entry["target"]["api"] == "Produce"
        assert entry["target"]["transactional_ids"] == ["slow-1"]
        assert entry["target"]["producer_ids"] == [2]
        assert entry["params"]["ms"] == 300
        assert entry["end"] - entry["start"] >= 0.29

    run(body())


def test_jittered_delay_is_seeded(tmp_path: Path) -> None:
    async def draws(seed: int) -> list[float]:
        server = await FakeKafka().start()
        fleet = await ProxyFleet(seed=seed).start()
        link = await fleet.add_link("l", server.address)
        fleet.add_rule({"id": "j", "kind": "delay", "ms": 5, "jitter": "normal", "jitter_ms": 3})
        client = await RawClient().connect(link.address)
        for _ in range(5):
            await client.send(END_TXN, 1, {"transactional_id": "t"})
            await client.recv()
        state = fleet.rule_state("j")
        assert state.applied == 5
        value = [state.rng.random() for _ in range(3)]
        client.close()
        await fleet.close()
        await server.close()
        return value

    assert run(draws(1)) == run(draws(1))
    assert run(draws(1)) != run(draws(2))


def test_drop_request_nth_only(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "drop_request", "api": "EndTxn", "nth": 2})
        c1 = await client.send(END_TXN, 1, {"transactional_id": "a"})
        assert (await client.recv())[0] == c1
        await client.send(END_TXN, 1, {"transactional_id": "a"})  # dropped
        c3 = await client.send(END_TXN, 1, {"transactional_id": "a"})
        assert (await client.recv())[0] == c3
        assert [r.correlation_id for r in server.received] == [1, 3]
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "drop_request" and entry["target"]["correlation_id"] == 2

    run(body())


def test_drop_response(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        rule = fleet.add_rule({"kind": "drop_response", "api": [END_TXN], "nth": 1})
        await client.send(END_TXN, 1, {"transactional_id": "a"})
        c2 = await client.send(END_TXN, 1, {"transactional_id": "a"})
        assert (await client.recv())[0] == c2
        assert [r.correlation_id for r in server.received] == [1, 2]
        fleet.remove_rule(rule.id)
        c3 = await client.send(3, 12, {"topics": None})
        assert (await client.recv())[0] == c3
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "drop_response" and entry["target"]["correlation_id"] == 1

    run(body())


def test_duplicate_is_answered_once(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "duplicate", "api": "Produce", "producer_id": 42})
        c1 = await client.send(0, PRODUCE_V, produce_body("t", 42))
        c2 = await client.send(0, PRODUCE_V, produce_body("t", 43))
        got = await server.wait_received(3)
        assert [r.correlation_id for r in got[:2]] == [c1, c1 - 2**30 - 1] or (
            got[0].correlation_id == c1 and got[1].correlation_id < 0
        )
        assert got[1].frame[8:] == got[0].frame[8:]  # same request, other correlation id
        assert got[2].correlation_id == c2
        assert [(await client.recv())[0] for _ in range(2)] == [c1, c2]
        assert await client.nothing_within(0.2)
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "duplicate" and entry["target"]["producer_ids"] == [42]
        assert entry["params"]["outcome"] == "duplicate response swallowed"

    run(body())


def test_reorder_changes_upstream_order_not_response_order(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "reorder", "api": "EndTxn", "nth": 1, "max_hold_ms": 60_000})
        c1 = await client.send(END_TXN, 1, {"transactional_id": "first"})
        c2 = await client.send(3, 12, {"topics": None})  # not matching: passes
        c3 = await client.send(END_TXN, 1, {"transactional_id": "second"})  # releases c1
        got = await server.wait_received(3)
        assert [r.correlation_id for r in got] == [c2, c3, c1]
        assert [(await client.recv())[0] for _ in range(3)] == [c1, c2, c3]
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "reorder" and entry["params"]["released"] == "later request passed"

    run(body())


def test_reorder_across_connections(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        other = await RawClient().connect(fleet.link("client->n1").address)
        fleet.add_rule({"kind": "reorder", "api": "Produce", "nth": 1})
        c1 = await client.send(0, PRODUCE_V, produce_body("a", 1))
        await asyncio.sleep(0.05)
        assert server.received == []
        o1 = await other.send(0, PRODUCE_V, produce_body("b", 2))
        got = await server.wait_received(2)
        assert [(r.conn, r.correlation_id) for r in got] == [(2, o1), (1, c1)]
        assert (await client.recv())[0] == c1 and (await other.recv())[0] == o1
        other.close()
        await teardown(server, fleet, client)

    run(body())


def test_reorder_max_hold(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "reorder", "api": "EndTxn", "max_hold_ms": 200})
        t0 = time.monotonic()
        c1 = await client.send(END_TXN, 1, {"transactional_id": "x"})
        assert (await client.recv())[0] == c1
        assert time.monotonic() - t0 >= 0.2
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["params"]["released"] == "max_hold"

    run(body())


def test_non_head_of_line_delay_keeps_response_order(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule(
            {"kind": "delay", "api": "EndTxn", "ms": 300, "head_of_line": False, "nth": 1}
        )
        c1 = await client.send(END_TXN, 1, {"transactional_id": "x"})
        c2 = await client.send(3, 12, {"topics": None})
        c3 = await client.send(0, PRODUCE_V, produce_body(None, 1, acks=0))  # no response
        c4 = await client.send(3, 12, {"topics": None})
        got = await server.wait_received(4)
        assert [r.correlation_id for r in got] == [c2, c3, c4, c1]
        assert [(await client.recv())[0] for _ in range(3)] == [c1, c2, c4]
        await teardown(server, fleet, client)

    run(body())


def test_head_of_line_delay_blocks_later_requests(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "delay", "api": "EndTxn", "ms": 200, "nth": 1})
        c1 = await client.send(END_TXN, 1, {"transactional_id": "x"})
        c2 = await client.send(3, 12, {"topics": None})
        got = await server.wait_received(2)
        assert [r.correlation_id for r in got] == [c1, c2]
        assert [(await client.recv())[0] for _ in range(2)] == [c1, c2]
        await teardown(server, fleet, client)

    run(body())


def test_response_delay(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "delay", "direction": "response", "api": "Metadata", "ms": 250})
        t0 = time.monotonic()
        await client.send(3, 12, {"topics": None})
        await server.wait_received(1)
        await client.recv()
        assert time.monotonic() - t0 >= 0.25
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["target"]["direction"] == "response"

    run(body())


def test_blackhole_then_heal(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        c1 = await client.send(3, 12, {"topics": None})
        assert (await client.recv())[0] == c1
        fleet.add_rule({"kind": "blackhole", "link": "client->*"})
        await client.send(3, 12, {"topics": None})
        assert await client.nothing_within(0.2)
        assert len(server.received) == 1
        assert fleet.heal_all() == 1
        c3 = await client.send(3, 12, {"topics": None})
        assert (await client.recv())[0] == c3
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "blackhole" and entry["link"] == "client->n1"
        assert entry["end"] >= entry["start"]

    run(body())


def test_blackhole_responses_only(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        rule = fleet.add_rule({"kind": "blackhole", "direction": "response"})
        await client.send(3, 12, {"topics": None})
        await server.wait_received(1)
        assert await client.nothing_within(0.2)
        fleet.remove_rule(rule.id)
        c2 = await client.send(3, 12, {"topics": None})
        assert (await client.recv())[0] == c2
        await teardown(server, fleet, client)

    run(body())


def test_reset_closes_and_refuses(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        link = fleet.link("client->n1")
        await client.send(3, 12, {"topics": None})
        await client.recv()
        rule = fleet.add_rule({"kind": "reset", "link": "client->n1"})
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await client.recv_frame()
        refused = await RawClient().connect(link.address)
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await refused.recv_frame()
        assert link.stats.connections_refused >= 1
        fleet.remove_rule(rule.id)
        again = await RawClient().connect(link.address)
        c = await again.send(3, 12, {"topics": None})
        assert (await again.recv())[0] == c
        again.close()
        await teardown(server, fleet, client)
        assert [e["kind"] for e in read_fault_log(tmp_path)] == ["reset"]

    run(body())


def test_throttle(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "throttle", "bytes_per_second": 200_000, "direction": "request"})
        t0 = time.monotonic()
        await client.send(0, 3, big_produce(500_000))
        await client.recv()
        assert time.monotonic() - t0 >= 2.0  # 500 kB at 200 kB/s, minus one burst
        await teardown(server, fleet, client)

    run(body())


def test_window_in_the_future_then_open(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        start = time.time() - fleet.origin + 0.3
        fleet.add_rule({"kind": "drop_request", "api": "Metadata", "window": {"start": start}})
        c1 = await client.send(3, 12, {"topics": None})
        assert (await client.recv())[0] == c1
        await asyncio.sleep(max(0.0, fleet.origin + start - time.time()) + 0.05)
        await client.send(3, 12, {"topics": None})
        assert await client.nothing_within(0.2)
        assert len(server.received) == 1
        await teardown(server, fleet, client)

    run(body())


def test_window_link_rule_activates_on_timer(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        now = time.time()
        fleet.add_rule(
            {"kind": "reset", "window": {"start": now + 0.2, "end": now + 0.5, "clock": "absolute"}}
        )
        await client.send(3, 12, {"topics": None})
        await client.recv()
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await client.recv_frame(timeout=10)  # closed by the window timer
        await asyncio.sleep(max(0.0, now + 0.55 - time.time()))
        again = await RawClient().connect(fleet.link("client->n1").address)
        c = await again.send(3, 12, {"topics": None})
        assert (await again.recv())[0] == c
        again.close()
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "reset" and entry["end"] - entry["start"] >= 0.25

    run(body())


def test_rule_added_mid_stream_switches_at_frame_boundary(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        corr, big = client.encode(0, 3, big_produce(200_000))
        client.writer.write(big[:100_000])
        await client.writer.drain()
        await eventually(lambda: fleet.link("client->n1").stats.bytes_up >= 50_000)
        fleet.add_rule({"kind": "delay", "ms": 50})  # frame rules: capture from the next frame
        client.writer.write(big[100_000:])
        c2 = await client.send(END_TXN, 1, {"transactional_id": "z"})
        got = await server.wait_received(2)
        assert got[0].frame == big[4:]
        assert [(await client.recv())[0] for _ in range(2)] == [corr, c2]
        await teardown(server, fleet, client)

    run(body())


def test_rule_added_while_the_fast_path_streams_a_frame(
    tmp_path: Path, fast_path_hits: FastPathHits
) -> None:
    """The body of a large frame goes through the mid-frame fast path; a rule added
    meanwhile applies from the next frame on, and the large frame arrives intact."""

    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        corr, big = client.encode(0, 3, big_produce(3_000_000))
        client.writer.write(big[:1_500_000])
        await client.writer.drain()
        await eventually(lambda: fleet.link("client->n1").stats.bytes_up >= 1_000_000)
        assert fast_path_hits.n > 0
        fleet.add_rule({"kind": "drop_request", "api": "EndTxn"})
        _c2, end_txn = client.encode(END_TXN, 1, {"transactional_id": "x"})  # dropped
        c3, metadata = client.encode(3, 12, {"topics": None})
        client.writer.write(big[1_500_000:] + end_txn + metadata)
        got = await server.wait_received(2)
        assert got[0].frame == big[4:] and got[1].correlation_id == c3
        assert [(await client.recv())[0] for _ in range(2)] == [corr, c3]
        assert len(server.received) == 2
        link = fleet.link("client->n1")
        assert link.stats.bytes_up == len(big) + len(end_txn) + len(metadata)
        await teardown(server, fleet, client)
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "drop_request" and entry["target"]["correlation_id"] == 2

    run(body())


def test_heal_releases_held_and_cuts_delays(tmp_path: Path) -> None:
    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule({"kind": "reorder", "api": "EndTxn", "max_hold_ms": 600_000})
        fleet.add_rule({"kind": "delay", "api": "Metadata", "ms": 600_000})
        c1 = await client.send(END_TXN, 1, {"transactional_id": "x"})
        c2 = await client.send(3, 12, {"topics": None})
        await asyncio.sleep(0.05)
        assert server.received == []
        assert fleet.heal_all() == 2
        got = await server.wait_received(2)
        assert {r.correlation_id for r in got} == {c1, c2}
        assert [(await client.recv())[0] for _ in range(2)] == [c1, c2]
        await teardown(server, fleet, client)
        assert sorted(e["kind"] for e in read_fault_log(tmp_path)) == ["delay", "reorder"]

    run(body())


def test_many_pipelined_requests_with_random_faults(tmp_path: Path) -> None:
    """Mixed faults on a pipelined stream: every response arrives once, in order."""

    async def body() -> None:
        server, fleet, client = await setup(tmp_path)
        fleet.add_rule(
            {
                "kind": "delay",
                "api": "Metadata",
                "ms": 3,
                "jitter": "uniform",
                "jitter_ms": 3,
                "head_of_line": False,
                "probability": 0.5,
            }
        )
        fleet.add_rule({"kind": "reorder", "api": "EndTxn", "probability": 0.3, "max_hold_ms": 50})
        fleet.add_rule({"kind": "duplicate", "api": "Produce", "probability": 0.3})
        expected = []
        for i in range(300):
            kind = i % 3
            if kind == 0:
                expected.append(await client.send(3, 12, {"topics": None}))
            elif kind == 1:
                expected.append(await client.send(END_TXN, 1, {"transactional_id": f"t{i}"}))
            else:
                expected.append(await client.send(0, PRODUCE_V, produce_body("p", i)))
        got = [(await client.recv())[0] for _ in range(300)]
        assert got == expected
        assert await client.nothing_within(0.2)
        n_dups = sum(1 for r in server.received if r.correlation_id < 0)
        assert len(server.received) == 300 + n_dups
        await teardown(server, fleet, client)

    run(body())
