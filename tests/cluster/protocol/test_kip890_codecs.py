"""Round trips of the request and response versions the KIP-890 cluster work serves
(AddPartitionsToTxn v4-v5, UpdateFeatures v0-v2, ApiVersions v3-v4 with features)
through the node's codec (frame guard included) and kio, and the hand-written
AddPartitionsToTxn v4-v5 encoders byte for byte against kio's."""

from __future__ import annotations

from typing import Any

import pytest

from txnchaos.cluster.protocol import verify_codecs
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import (
    EncodedResponse,
    decode_request,
    decode_response,
    encode_request,
    encode_request_with_kio,
    encode_response,
    request_class,
    response_class,
)

TXNS = [
    {
        "transactional_id": "tx-1",
        "producer_id": 4001,
        "producer_epoch": 7,
        "verify_only": True,
        "topics": [{"name": "a", "partitions": [0, 3]}, {"name": "b", "partitions": [1]}],
    },
    {
        "transactional_id": "tx-2",
        "producer_id": 4002,
        "producer_epoch": 0,
        "verify_only": False,
        "topics": [{"name": "a", "partitions": [2]}],
    },
]
RESULTS = [
    {
        "transactional_id": "tx-1",
        "topic_results": [
            {
                "name": "a",
                "results_by_partition": [
                    {"partition_index": 0, "partition_error_code": 0},
                    {"partition_index": 3, "partition_error_code": 120},
                ],
            }
        ],
    }
]
FEATURES = {
    "supported_features": [{"name": "transaction.version", "min_version": 0, "max_version": 2}],
    "finalized_features_epoch": 42,
    "finalized_features": [
        {"name": "transaction.version", "min_version_level": 2, "max_version_level": 2}
    ],
}


def requests() -> list[tuple[int, int, dict[str, Any]]]:
    out: list[tuple[int, int, dict[str, Any]]] = [(24, v, {"transactions": TXNS}) for v in (4, 5)]
    out.append(
        (
            57,
            0,
            {
                "feature_updates": [
                    {
                        "feature": "transaction.version",
                        "max_version_level": 1,
                        "allow_downgrade": True,
                    }
                ]
            },
        )
    )
    for v in (1, 2):
        out.append(
            (
                57,
                v,
                {
                    "feature_updates": [
                        {
                            "feature": "transaction.version",
                            "max_version_level": 0,
                            "upgrade_type": 2,
                        }
                    ],
                    "validate_only": True,
                },
            )
        )
    out += [(18, v, {"client_software_name": "t", "client_software_version": "1"}) for v in (3, 4)]
    return out


def responses() -> list[tuple[int, int, dict[str, Any]]]:
    out: list[tuple[int, int, dict[str, Any]]] = [
        (24, v, {"throttle_time": 0, "error_code": 0, "results_by_transaction": RESULTS})
        for v in (4, 5)
    ]
    out.append((24, 4, {"throttle_time": 0, "error_code": 31, "results_by_transaction": []}))
    for v in (0, 1):
        out.append(
            (
                57,
                v,
                {
                    "throttle_time": 0,
                    "error_code": 95,
                    "error_message": "no",
                    "results": [
                        {"feature": "transaction.version", "error_code": 95, "error_message": "no"}
                    ],
                },
            )
        )
    out.append((57, 2, {"throttle_time": 0, "error_code": 0, "error_message": None}))
    for v in (3, 4):
        out.append(
            (
                18,
                v,
                {
                    "error_code": 0,
                    "api_keys": [{"api_key": 24, "min_version": 0, "max_version": 5}],
                    "throttle_time": 0,
                    **FEATURES,
                },
            )
        )
    return out


@pytest.mark.parametrize(("api_key", "version", "fields"), requests())
def test_request_round_trip(api_key: int, version: int, fields: dict[str, Any]) -> None:
    request = make(request_class(api_key, version), fields)
    frame = encode_request(11, request, "txnchaos-node-1")[4:]
    header, decoded = decode_request(frame)
    assert decoded == request
    assert (header.correlation_id, header.client_id) == (11, "txnchaos-node-1")


@pytest.mark.parametrize(("api_key", "version", "fields"), responses())
def test_response_round_trip(api_key: int, version: int, fields: dict[str, Any]) -> None:
    response = make(response_class(api_key, version), fields)
    correlation_id, decoded = decode_response(api_key, version, encode_response(5, response)[4:])
    assert (correlation_id, decoded) == (5, response)


@pytest.mark.parametrize("version", [4, 5])
def test_hand_written_add_partitions_request_matches_kio(version: int) -> None:
    request = make(request_class(24, version), transactions=TXNS)
    assert encode_request(3, request, "n") == encode_request_with_kio(3, request, "n")


@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize(
    "results",
    [
        [],
        [("tx-1", [("a", [(0, 0), (3, 120)]), ("b", [(1, 48)])]), ("tx-2", [("a", [(2, 0)])])],
    ],
)
def test_hand_written_add_partitions_response_matches_kio(version: int, results: Any) -> None:
    entity = make(
        response_class(24, version),
        throttle_time=0,
        error_code=0,
        results_by_transaction=[
            {
                "transactional_id": txn,
                "topic_results": [
                    {
                        "name": name,
                        "results_by_partition": [
                            {"partition_index": p, "partition_error_code": e} for p, e in parts
                        ],
                    }
                    for name, parts in topics
                ],
            }
            for txn, topics in results
        ],
    )
    body = verify_codecs.add_partitions_to_txn_response(0, results)
    fast = encode_response(9, EncodedResponse(24, version, body, ()))
    assert fast == encode_response(9, entity)


PRODUCE_TOPICS = [
    {
        "name": "t",
        "partition_data": [
            {"index": 0, "records": b"\x01" * 70},
            {"index": 5, "records": b"\x02" * 200},
            {"index": 2, "records": None},
        ],
    },
    {"name": "other", "partition_data": [{"index": 1, "records": b""}]},
]


@pytest.mark.parametrize("version", [9, 10, 11, 12])
@pytest.mark.parametrize("txn_id", ["tx-1", None])
def test_hand_written_produce_request_matches_kio(version: int, txn_id: str | None) -> None:
    request = make(
        request_class(0, version),
        transactional_id=txn_id,
        acks=-1,
        timeout=30_000,
        topic_data=PRODUCE_TOPICS,
    )
    assert encode_request(3, request, "c") == encode_request_with_kio(3, request, "c")


@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize("committed", [True, False])
def test_hand_written_end_txn_request_matches_kio(version: int, committed: bool) -> None:
    request = make(
        request_class(26, version),
        transactional_id="tx-1",
        producer_id=2**40 + 7,
        producer_epoch=32766,
        committed=committed,
    )
    assert encode_request(3, request, "c") == encode_request_with_kio(3, request, "c")
