"""``strip_partition``: a WriteTxnMarkers request reaches the node without one of its
partitions (chosen by the rule's seeded RNG), the rest of it intact; the fault log names the
partition; requests of other APIs and requests after the rule is spent go on untouched."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from pydantic import ValidationError

from txnchaos.cluster.protocol.codec import request_class
from txnchaos.harness.faults.proxy import ProxyFleet
from txnchaos.harness.faults.proxy.rules import StripPartitionRule, parse_rule
from txnchaos.harness.faults.proxy.rules.strip_partition import strip_one
from txnchaos.rundir.fault_log import read_fault_log

from .fakekafka import FakeKafka, RawClient, make, run

WRITE_TXN_MARKERS = 27
END_TXN = 26
MARKERS: dict[str, Any] = {
    "markers": [
        {
            "producer_id": 7,
            "producer_epoch": 1,
            "transaction_result": True,
            "coordinator_epoch": 3,
            "topics": [
                {"name": "events", "partition_indexes": [0, 2]},
                {"name": "copies", "partition_indexes": [1]},
            ],
        },
        {
            "producer_id": 8,
            "producer_epoch": 0,
            "transaction_result": False,
            "coordinator_epoch": 3,
            "topics": [{"name": "events", "partition_indexes": [3]}],
        },
    ]
}


def _places(body: Any) -> set[tuple[int, str, int]]:
    return {
        (int(m.producer_id), t.name, int(p))
        for m in body.markers
        for t in m.topics
        for p in t.partition_indexes
    }


def test_strip_one_removes_exactly_one_partition() -> None:
    body = make(request_class(WRITE_TXN_MARKERS, 1), MARKERS)
    every = _places(body)
    seen = set()
    for seed in range(40):
        out = strip_one(body, random.Random(seed))
        assert out is not None
        stripped_body, stripped = out
        gone = (stripped["producer_id"], stripped["topic"], stripped["partition"])
        assert _places(stripped_body) == every - {gone}
        assert all(t.partition_indexes for m in stripped_body.markers for t in m.topics)
        seen.add(gone)
    assert seen == every  # any partition may be the one
    empty = make(request_class(WRITE_TXN_MARKERS, 1), {"markers": []})
    assert strip_one(empty, random.Random(0)) is None


def test_the_rule_strips_write_txn_markers_only() -> None:
    assert StripPartitionRule().api == [WRITE_TXN_MARKERS]
    with pytest.raises(ValidationError):
        parse_rule({"kind": "strip_partition", "api": ["EndTxn"]})
    with pytest.raises(ValidationError):
        parse_rule({"kind": "strip_partition", "direction": "response"})


def test_the_node_gets_the_request_without_one_partition(tmp_path: Path) -> None:
    async def body() -> None:
        server = await FakeKafka().start()
        fleet = await ProxyFleet(fault_log=tmp_path / "faults.jsonl", seed=5).start()
        link = await fleet.add_link("n1001->n1", server.address)
        client = await RawClient().connect(link.address)
        fleet.add_rule(parse_rule({"kind": "strip_partition", "id": "s", "nth": 1}))
        c1 = await client.send(WRITE_TXN_MARKERS, 1, MARKERS)
        c2 = await client.send(END_TXN, 1, {"transactional_id": "a"})
        c3 = await client.send(WRITE_TXN_MARKERS, 1, MARKERS)  # the rule is spent
        assert [(await client.recv())[0] for _ in range(3)] == [c1, c2, c3]
        first, _, third = await server.wait_received(3)
        every = _places(make(request_class(WRITE_TXN_MARKERS, 1), MARKERS))
        assert len(_places(first.body)) == len(every) - 1
        assert _places(third.body) == every
        assert first.correlation_id == c1
        client.close()
        await fleet.close()
        await server.close()
        (entry,) = read_fault_log(tmp_path)
        assert entry["kind"] == "strip_partition" and entry["link"] == "n1001->n1"
        params = entry["params"]
        gone = (params["producer_id"], params["topic"], params["partition"])
        assert gone in every and gone not in _places(first.body)

    run(body())


def test_answer_gives_the_stripped_partition_back_with_its_error(tmp_path: Path) -> None:
    """With ``answer``, the node still never sees the stripped partition, and the client's
    answer names it with that error (the node answers nothing for it: here it answers no
    marker at all, so the marker result is made too)."""

    async def body() -> None:
        server = await FakeKafka().start()
        fleet = await ProxyFleet(fault_log=tmp_path / "faults.jsonl", seed=5).start()
        link = await fleet.add_link("n1001->n1", server.address)
        client = await RawClient().connect(link.address)
        rule = {"kind": "strip_partition", "id": "s", "nth": 1, "answer": "KAFKA_STORAGE_ERROR"}
        fleet.add_rule(parse_rule(rule))
        c1 = await client.send(WRITE_TXN_MARKERS, 1, MARKERS)
        c2 = await client.send(WRITE_TXN_MARKERS, 1, MARKERS)  # the rule is spent
        (corr1, first), (corr2, second) = await client.recv(), await client.recv()
        assert (corr1, corr2) == (c1, c2)
        (sent, _) = await server.wait_received(2)
        every = _places(make(request_class(WRITE_TXN_MARKERS, 1), MARKERS))
        (gone,) = every - _places(sent.body)
        answered = {
            (int(m.producer_id), t.name, int(p.partition_index)): int(p.error_code)
            for m in first.markers
            for t in m.topics
            for p in t.partitions
        }
        assert answered == {gone: int(ErrorCode.kafka_storage_error)}
        assert list(second.markers) == []  # the node's own (empty) answer, untouched
        client.close()
        await fleet.close()
        await server.close()
        (entry,) = read_fault_log(tmp_path)
        assert entry["params"]["answer"] == "kafka_storage_error"

    run(body())


def test_answer_must_be_an_error_name() -> None:
    with pytest.raises(ValidationError, match="not a Kafka error name"):
        parse_rule({"kind": "strip_partition", "answer": "disk_on_fire"})
    with pytest.raises(ValidationError, match="give an error"):
        parse_rule({"kind": "strip_partition", "answer": "none"})
