"""Target extraction from request bodies, and broker-address rewriting in responses."""

from __future__ import annotations

import pytest

from txnchaos.cluster.protocol.codec import (
    decode_response,
    encode_request,
    encode_response,
    request_class,
    response_class,
)
from txnchaos.harness.faults.proxy.apis import (
    Targets,
    api_key_of,
    api_name,
    produce_acks,
    request_targets,
)
from txnchaos.harness.faults.proxy.rewrite import rewrite_response

from .fakekafka import make, produce_body, run

T5 = Targets(("t",), (5,))


def frame_of(api_key: int, version: int, body: dict) -> bytes:
    return encode_request(7, make(request_class(api_key, version), body), "c")


def test_api_names() -> None:
    assert api_name(0) == "Produce" and api_name(22) == "InitProducerId"
    assert api_key_of("AddPartitionsToTxn") == 24 == api_key_of("add_partitions_to_txn")
    assert api_key_of("describecluster") == 60 and api_key_of(3) == 3
    with pytest.raises(ValueError):
        api_key_of("Nope")


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_produce_targets_and_acks(version: int) -> None:
    frame = frame_of(0, version, produce_body("tx", 99, acks=0))
    assert request_targets(0, frame) == Targets(("tx",), (99,))
    assert produce_acks(frame, version) == 0
    assert produce_acks(frame_of(0, version, produce_body(None, 1, acks=-1)), version) == -1


@pytest.mark.parametrize(
    ("api_key", "version", "body", "expected"),
    [
        (22, 0, {"transactional_id": "t"}, Targets(("t",), ())),
        (22, 4, {"transactional_id": "t", "producer_id": 5}, Targets(("t",), (5,))),
        (24, 0, {"v3_and_below_transactional_id": "t", "v3_and_below_producer_id": 5}, T5),
        (24, 3, {"v3_and_below_transactional_id": "t", "v3_and_below_producer_id": 5}, T5),
        (
            24,
            4,
            {
                "transactions": [
                    {"transactional_id": "a", "producer_id": 1},
                    {"transactional_id": "b", "producer_id": 2},
                ]
            },
            Targets(("a", "b"), (1, 2)),
        ),
        (25, 0, {"transactional_id": "t", "producer_id": 5}, Targets(("t",), (5,))),
        (26, 1, {"transactional_id": "t", "producer_id": 5}, Targets(("t",), (5,))),
        (26, 5, {"transactional_id": "t", "producer_id": 5}, Targets(("t",), (5,))),
        (28, 3, {"transactional_id": "t", "producer_id": 5}, Targets(("t",), (5,))),
        (27, 1, {"markers": [{"producer_id": 8}, {"producer_id": 9}]}, Targets((), (8, 9))),
        (10, 2, {"key": "t", "key_type": 1}, Targets(("t",), ())),
        (10, 2, {"key": "group", "key_type": 0}, Targets()),
        (10, 4, {"coordinator_keys": ["x", "y"], "key_type": 1}, Targets(("x", "y"), ())),
        (3, 12, {}, Targets()),
    ],
)
def test_request_targets(api_key: int, version: int, body: dict, expected: Targets) -> None:
    assert request_targets(api_key, frame_of(api_key, version, body)) == expected


def test_garbage_has_no_targets() -> None:
    assert request_targets(26, b"\0\0\0\x08\0\x1a\0\x01\0\0\0\x01") == Targets()


async def _resolve(node_id: int, host: str, port: int) -> tuple[str, int]:
    return "127.0.0.9", 10000 + node_id


BROKERS = [
    {"node_id": 1, "broker_id": 1, "host": "far-1", "port": 9092},
    {"node_id": 2, "broker_id": 2, "host": "far-2", "port": 9093},
]


def _roundtrip(api_key: int, version: int, body: dict) -> object:
    frame = encode_response(41, make(response_class(api_key, version), body))
    new = run(rewrite_response(api_key, version, frame, _resolve))
    corr, decoded = decode_response(api_key, version, new[4:])
    assert corr == 41
    return decoded


@pytest.mark.parametrize("version", range(14))
def test_rewrite_metadata(version: int) -> None:
    out = _roundtrip(3, version, {"brokers": BROKERS, "cluster_id": "c", "controller_id": 1})
    assert [(b.node_id, b.host, b.port) for b in out.brokers] == [  # type: ignore[attr-defined]
        (1, "127.0.0.9", 10001),
        (2, "127.0.0.9", 10002),
    ]


@pytest.mark.parametrize("version", range(3))
def test_rewrite_describe_cluster(version: int) -> None:
    out = _roundtrip(60, version, {"brokers": BROKERS, "cluster_id": "c"})
    assert [(b.broker_id, b.host, b.port) for b in out.brokers] == [  # type: ignore[attr-defined]
        (1, "127.0.0.9", 10001),
        (2, "127.0.0.9", 10002),
    ]


@pytest.mark.parametrize("version", range(7))
def test_rewrite_find_coordinator(version: int) -> None:
    if version >= 4:
        coords = [
            {"key": "a", "node_id": 2, "host": "far-2", "port": 9093},
            {"key": "b", "node_id": -1, "host": "", "port": -1, "error_code": 15},
        ]
        out = _roundtrip(10, version, {"coordinators": coords})
        got = [(c.key, c.node_id, c.host, c.port) for c in out.coordinators]  # type: ignore[attr-defined]
        assert got == [("a", 2, "127.0.0.9", 10002), ("b", -1, "", -1)]
    else:
        out = _roundtrip(10, version, {"node_id": 2, "host": "far-2", "port": 9093})
        assert (out.node_id, out.host, out.port) == (2, "127.0.0.9", 10002)  # type: ignore[attr-defined]
