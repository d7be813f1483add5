"""Our client's requests against a codec that shares no code with ours: kafka-python's
protocol classes (generated from Kafka's message schemas by another project). Every request our
producer sends, at every version it speaks (``CLIENT_VERSIONS``), is encoded as the client
encodes it (``encode_request``: the hand-written Produce and EndTxn encoders, kio for the
rest); kafka-python must decode the frame into the very values we meant, field by field, and
encode those values into the very same bytes. Our server decodes with kio too, so a symmetric
encoding bug would cancel out between our client and our server: not here."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import encode_request, request_class
from txnchaos.harness.clients.batch import Record, encode_batch
from txnchaos.harness.clients.connection import (
    API_ADD_OFFSETS,
    API_ADD_PARTITIONS,
    API_END_TXN,
    API_FIND_COORDINATOR,
    API_INIT_PRODUCER_ID,
    API_METADATA,
    API_PRODUCE,
    API_TXN_OFFSET_COMMIT,
    API_VERSIONS,
    CLIENT_VERSIONS,
)

#: kafka-python's class of each request our client sends
INDEPENDENT = {
    API_PRODUCE: ProduceRequest,
    API_METADATA: MetadataRequest,
    API_FIND_COORDINATOR: FindCoordinatorRequest,
    API_VERSIONS: ApiVersionsRequest,
    API_INIT_PRODUCER_ID: InitProducerIdRequest,
    API_ADD_PARTITIONS: AddPartitionsToTxnRequest,
    API_ADD_OFFSETS: AddOffsetsToTxnRequest,
    API_END_TXN: EndTxnRequest,
    API_TXN_OFFSET_COMMIT: TxnOffsetCommitRequest,
}

BATCH = encode_batch(
    [Record(b"k1", b"w|3|0"), Record(None, b"w|3|1")],
    producer_id=4242,
    producer_epoch=7,
    base_sequence=11,
    transactional=True,
)

#: each request as the client fills it (the union of its versions' fields; ``make`` keeps
#: what a version has), every value distinct so that a field written in another's place shows
BODIES: dict[int, dict[str, Any]] = {
    API_PRODUCE: {
        "transactional_id": "tx-produce",
        "acks": -1,
        "timeout": 30_001,
        "topic_data": [
            {
                "name": "events",
                "partition_data": [{"index": 0, "records": BATCH}, {"index": 5, "records": BATCH}],
            },
            {"name": "outputs", "partition_data": [{"index": 2, "records": BATCH}]},
        ],
    },
    API_METADATA: {
        "topics": [{"name": "events", "topic_id": None}, {"name": "outputs", "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": True,
    },
    API_FIND_COORDINATOR: {"key_type": 1, "key": "tx-find", "coordinator_keys": ["tx-find"]},
    API_VERSIONS: {"client_software_name": "txnchaos-producer", "client_software_version": "0.1"},
    API_INIT_PRODUCER_ID: {
        "transactional_id": "tx-init",
        "transaction_timeout": 60_002,
        "producer_id": 4243,
        "producer_epoch": 8,
        "enable2_pc": True,
        "keep_prepared_txn": True,
    },
    API_ADD_PARTITIONS: {
        "v3_and_below_transactional_id": "tx-add",
        "v3_and_below_producer_id": 4244,
        "v3_and_below_producer_epoch": 9,
        "v3_and_below_topics": [
            {"name": "events", "partitions": [0, 5]},
            {"name": "outputs", "partitions": [2]},
        ],
    },
    API_ADD_OFFSETS: {
        "transactional_id": "tx-offsets",
        "producer_id": 4245,
        "producer_epoch": 10,
        "group_id": "copiers",
    },
    API_END_TXN: {
        "transactional_id": "tx-end",
        "producer_id": 4246,
        "producer_epoch": 11,
        "committed": True,
    },
    API_TXN_OFFSET_COMMIT: {
        "transactional_id": "tx-commit",
        "group_id": "copiers",
        "producer_id": 4247,
        "producer_epoch": 12,
        "generation_id": 13,
        "member_id": "member-1",
        "group_instance_id": "instance-1",
        "topics": [
            {
                "name": "events",
                "partitions": [
                    {
                        "partition_index": 4,
                        "committed_offset": 1_000_001,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    },
}

CASES = [
    (api, v) for api, (low, high) in sorted(CLIENT_VERSIONS.items()) for v in range(low, high + 1)
]


def _independent_name(container: Any, name: str) -> str:
    """kafka-python's name of a field kio names ``name`` (kio drops ``_ms`` from durations)."""
    for candidate in (name, f"{name}_ms"):
        if candidate in _fields(container):
            return candidate
    raise AssertionError(f"kafka-python's {type(container).__name__} has no field {name!r}")


def _fields(container: Any) -> set[str]:
    return set(container.to_dict())


def assert_same(ours: Any, theirs: Any, path: str) -> None:
    """Every field of our kio entity holds, in kafka-python's decoding, the value we meant."""
    for f in dataclasses.fields(ours):
        want = getattr(ours, f.name)
        got = getattr(theirs, _independent_name(theirs, f.name))
        _compare(want, got, f"{path}.{f.name}")


def _compare(want: Any, got: Any, path: str) -> None:
    if dataclasses.is_dataclass(want):
        assert_same(want, got, path)
    elif isinstance(want, tuple):
        assert len(got) == len(want), path
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            _compare(w, g, f"{path}[{i}]")
    elif isinstance(want, datetime.timedelta):
        assert got == int(want.total_seconds() * 1000), path
    elif isinstance(want, uuid.UUID):
        assert uuid.UUID(str(got)) == want, path
    elif isinstance(want, bytes | bytearray | memoryview):
        assert bytes(got) == bytes(want), path
    else:
        assert (got == want and type(got) is not str) or got == want, path


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_every_request_our_client_sends_is_what_an_independent_codec_reads(
    api_key: int, version: int
) -> None:
    entity = make(request_class(api_key, version), BODIES[api_key])
    frame = encode_request(1234, entity, "txnchaos-producer")
    independent = INDEPENDENT[api_key]
    decoded = independent.decode(frame, version=version, header=True, framed=True)
    header = decoded.header
    assert (header.request_api_key, header.request_api_version) == (api_key, version)
    assert (header.correlation_id, header.client_id) == (1234, "txnchaos-producer")
    assert_same(entity, decoded, f"{independent.__name__} v{version}")
    assert decoded.encode(version=version, header=True, framed=True) == frame


def test_a_field_written_in_the_wrong_place_is_caught() -> None:
    """The check itself: an EndTxn whose commit flag went wrong on the wire decodes to other
    values than the ones meant, and is caught naming the field."""
    entity = make(request_class(API_END_TXN, 5), BODIES[API_END_TXN])
    frame = bytearray(encode_request(1, entity, "x"))
    aborted = make(request_class(API_END_TXN, 5), {**BODIES[API_END_TXN], "committed": False})
    frame[-2] = 0  # the committed flag, before the empty tagged fields
    decoded = EndTxnRequest.decode(bytes(frame), version=5, header=True, framed=True)
    with pytest.raises(AssertionError, match="committed"):
        assert_same(entity, decoded, "EndTxnRequest v5")
    assert_same(aborted, decoded, "EndTxnRequest v5")
