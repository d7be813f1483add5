"""The hand-written hot-path encoders write exactly kio's bytes, for every version served,
and kio decodes them back to the values they were given."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.cluster.protocol import hot_codecs
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import (
    EncodedResponse,
    _reader,
    decode_request,
    decode_response,
    encode_request,
    encode_request_with_kio,
    encode_response,
    request_class,
    response_class,
)

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
error_codes = st.integers(0, 130)
names = st.text(min_size=0, max_size=40)
nullable_text = st.none() | st.text(max_size=300)
correlation_ids = st.integers(0, 2**31 - 1)


def kio_body(api_key: int, version: int, data: dict[str, Any]) -> bytes:
    """kio's encoding of ``data`` without the size prefix and response header."""
    frame = encode_response(7, make(response_class(api_key, version), data))
    header = 4 + 4 + (1 if response_class(api_key, version).__header_schema__.__flexible__ else 0)
    return frame[header:]


def roundtrip(api_key: int, version: int, body: bytes) -> Any:
    """Frame the body as the server does and decode it with kio."""
    frame = encode_response(42, EncodedResponse(api_key, version, body))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, entity = decode_response(api_key, version, frame[4:])
    assert correlation_id == 42
    return entity


# -- Produce -------------------------------------------------------------------------------

partition_results = st.tuples(
    i32,
    error_codes,
    i64,
    st.just(-1) | st.integers(0, 2**41),
    i64,
    st.lists(st.tuples(i32, nullable_text), max_size=3),
    nullable_text,
)
produce_topics = st.lists(st.tuples(names, st.lists(partition_results, max_size=4)), max_size=3)


def by_version(version: int, topics: Any) -> Any:
    """Produce v13+ names topics by id: the same topics keyed by an id made from the name."""
    if version < 13:
        return topics
    return [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics]


def produce_dict(topics: Any, throttle: int) -> dict[str, Any]:
    return {
        "throttle_time": throttle,
        "responses": [
            {
                ("topic_id" if isinstance(name, uuid.UUID) else "name"): name,
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": error,
                        "base_offset": base,
                        "log_append_time": None if append_time == -1 else append_time,
                        "log_start_offset": log_start,
                        "record_errors": [
                            {"batch_index": b, "batch_index_error_message": m}
                            for b, m in record_errors
                        ],
                        "error_message": message,
                    }
                    for index, error, base, append_time, log_start, record_errors, message in parts
                ],
            }
            for name, parts in topics
        ],
    }


@pytest.mark.parametrize("version", hot_codecs.PRODUCE_VERSIONS)
@settings(max_examples=60, deadline=None)
@given(topics=produce_topics, throttle=st.integers(0, 2**31 - 1))
def test_produce_response_matches_kio(version: int, topics: Any, throttle: int) -> None:
    topics = by_version(version, topics)
    body = hot_codecs.produce_response(version, topics, throttle)
    assert body == kio_body(0, version, produce_dict(topics, throttle))
    decoded = roundtrip(0, version, body)
    key = "topic_id" if version >= 13 else "name"
    assert [getattr(t, key) for t in decoded.responses] == [name for name, _ in topics]
    for t, (_, parts) in zip(decoded.responses, topics, strict=True):
        assert [(p.index, int(p.error_code), p.base_offset) for p in t.partition_responses] == [
            (p[0], p[1], p[2]) for p in parts
        ]


@pytest.mark.parametrize("version", hot_codecs.PRODUCE_VERSIONS)
@settings(max_examples=40, deadline=None)
@given(
    name=names,
    numbers=st.tuples(i32, error_codes, i64, st.just(-1) | st.integers(0, 2**41), i64),
    throttle=st.integers(0, 2**31 - 1),
)
def test_single_partition_produce_response_matches_kio(
    version: int, name: str, numbers: tuple[int, int, int, int, int], throttle: int
) -> None:
    """The one-partition success shape has its own fast path; it must agree too."""
    topics = by_version(version, [(name, [(*numbers, (), None)])])
    body = hot_codecs.produce_response(version, topics, throttle)
    assert body == kio_body(0, version, produce_dict(topics, throttle))


# -- AddPartitionsToTxn -----------------------------------------------------------------------

partition_errors = st.lists(st.tuples(i32, error_codes), max_size=5)
topic_partition_errors = st.lists(st.tuples(names, partition_errors), max_size=3)


@pytest.mark.parametrize("version", hot_codecs.ADD_PARTITIONS_TO_TXN_VERSIONS)
@settings(max_examples=60, deadline=None)
@given(results=topic_partition_errors, throttle=st.integers(0, 2**31 - 1))
def test_add_partitions_to_txn_response_matches_kio(
    version: int, results: Any, throttle: int
) -> None:
    body = hot_codecs.add_partitions_to_txn_response(version, results, throttle)
    data = {
        "throttle_time": throttle,
        "results_by_topic_v3_and_below": [
            {
                "name": name,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": e} for p, e in parts
                ],
            }
            for name, parts in results
        ],
    }
    assert body == kio_body(24, version, data)
    decoded = roundtrip(24, version, body)
    assert [
        (t.name, [(p.partition_index, int(p.partition_error_code)) for p in t.results_by_partition])
        for t in decoded.results_by_topic_v3_and_below
    ] == [(name, list(parts)) for name, parts in results]


# -- EndTxn -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", hot_codecs.END_TXN_VERSIONS)
@settings(max_examples=30, deadline=None)
@given(
    error=error_codes,
    throttle=st.integers(0, 2**31 - 1),
    pid=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**15 - 1),
)
def test_end_txn_response_matches_kio(
    version: int, error: int, throttle: int, pid: int, epoch: int
) -> None:
    body = hot_codecs.end_txn_response(version, error, throttle, pid, epoch)
    fields: dict[str, object] = {"throttle_time": throttle, "error_code": error}
    if version >= 5:  # KIP-890: the producer id and epoch to use next
        fields.update(producer_id=pid, producer_epoch=epoch)
    assert body == kio_body(26, version, fields)
    decoded = roundtrip(26, version, body)
    assert int(decoded.error_code) == error
    assert decoded.throttle_time == datetime.timedelta(milliseconds=throttle)
    if version >= 5:
        assert (decoded.producer_id, decoded.producer_epoch) == (pid, epoch)


# -- WriteTxnMarkers ---------------------------------------------------------------------------

marker_results = st.lists(st.tuples(i64, topic_partition_errors), max_size=4)


@pytest.mark.parametrize("version", hot_codecs.WRITE_TXN_MARKERS_VERSIONS)
@settings(max_examples=60, deadline=None)
@given(markers=marker_results)
def test_write_txn_markers_response_matches_kio(version: int, markers: Any) -> None:
    body = hot_codecs.write_txn_markers_response(version, markers)
    data = {
        "markers": [
            {
                "producer_id": pid,
                "topics": [
                    {
                        "name": name,
                        "partitions": [{"partition_index": p, "error_code": e} for p, e in parts],
                    }
                    for name, parts in topics
                ],
            }
            for pid, topics in markers
        ]
    }
    assert body == kio_body(27, version, data)
    decoded = roundtrip(27, version, body)
    assert [m.producer_id for m in decoded.markers] == [pid for pid, _ in markers]


markers_to_write = st.lists(
    st.fixed_dictionaries(
        {
            "producer_id": i64,
            "producer_epoch": i16,
            "transaction_result": st.booleans(),
            "topics": st.lists(
                st.fixed_dictionaries(
                    {"name": names, "partition_indexes": st.lists(i32, max_size=6)}
                ),
                max_size=3,
            ),
            "coordinator_epoch": i32,
            "transaction_version": st.integers(-128, 127),
        }
    ),
    max_size=4,
)


@pytest.mark.parametrize("version", hot_codecs.WRITE_TXN_MARKERS_VERSIONS)
@settings(max_examples=60, deadline=None)
@given(
    markers=markers_to_write,
    correlation_id=correlation_ids,
    client_id=st.none() | st.text(max_size=30),
)
def test_write_txn_markers_request_matches_kio(
    version: int, markers: list[dict[str, Any]], correlation_id: int, client_id: str | None
) -> None:
    cls = request_class(27, version)
    request = make(cls, {"markers": markers})
    fast = encode_request(correlation_id, request, client_id)
    assert fast == encode_request_with_kio(correlation_id, request, client_id)
    header, decoded = decode_request(fast[4:])
    assert header.correlation_id == correlation_id
    assert header.client_id == client_id
    assert decoded == request


PRODUCE_BEYOND = hot_codecs.PRODUCE_VERSIONS.stop  # the first version not served


def test_unsupported_versions_are_refused() -> None:
    with pytest.raises(ValueError):
        hot_codecs.produce_response(PRODUCE_BEYOND, [])
    with pytest.raises(ValueError):
        hot_codecs.end_txn_response(6, 0)


def test_encoded_response_reads_like_the_kio_entity() -> None:
    body = hot_codecs.end_txn_response(1, 48)
    response = EncodedResponse(26, 1, body, (48,))
    assert int(response.error_code) == 48
    entity, _ = _reader(response_class(26, 1))(body, 0)
    assert response.entity == entity
    assert "EndTxnResponse" in repr(response)
    with pytest.raises(AttributeError):
        _ = response.no_such_field
