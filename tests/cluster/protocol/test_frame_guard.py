"""The frame guard walks every request schema exactly as kio encodes it, and refuses
frames whose counts, lengths or nulls do not fit before kio's reader sees them."""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from txnchaos.cluster.protocol.codec import (
    ProtocolError,
    decode_request,
    decode_request_as,
    encode_request_with_kio,
)
from txnchaos.cluster.protocol.frame_guard import MalformedFrame, request_guard


def walk_request(frame: bytes, key: int, version: int) -> int:
    return request_guard(load_request_schema(key, version))(frame)


def check_request(frame: bytes, key: int, version: int) -> None:
    walk_request(frame, key, version)


SAMPLES: dict[str, Any] = {
    "bool": True,
    "error_code": ErrorCode.none,
    "string": "abc",
    "bytes": b"\x01\x02",
    "records": b"\x00" * 5,
    "uuid": uuid.UUID(int=7),
    "datetime_i64": datetime.datetime.fromtimestamp(1, tz=datetime.UTC),
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=5),
    "float64": 1.5,
}


def filled(cls: type, nulls: bool = False) -> Any:
    """An instance with every field set (arrays of two), or with every nullable field
    null when ``nulls``."""
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if nulls and is_optional(field):
            kwargs[field.name] = None
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            kwargs[field.name] = (filled(kind.type_, nulls), filled(kind.type_, nulls))
        elif isinstance(kind, EntityField):
            kwargs[field.name] = filled(kind.type_, nulls)
        else:
            value = SAMPLES.get(get_schema_field_type(field), 3)
            is_tuple = isinstance(kind, PrimitiveTupleField)
            kwargs[field.name] = (value, value) if is_tuple else value
    return cls(**kwargs)


def all_request_classes() -> list[tuple[int, int]]:
    found = []
    for key in range(0, 93):
        for version in range(0, 20):
            try:
                load_request_schema(key, version)
            except Exception:
                continue
            found.append((key, version))
    return found


REQUESTS = all_request_classes()


def test_kio_has_requests_to_walk() -> None:
    assert len(REQUESTS) > 300


@pytest.mark.parametrize("nulls", [False, True])
def test_the_walk_ends_where_kio_s_encoding_ends(nulls: bool) -> None:
    for key, version in REQUESTS:
        cls = load_request_schema(key, version)
        frame = encode_request_with_kio(9, filled(cls, nulls), "client")[4:]
        assert walk_request(frame, key, version) == len(frame), (key, version, nulls)
        decode_request(frame)  # kio agrees the frame is well formed


def metadata_v9(count_varint: bytes) -> bytes:
    # header: key 3, version 9, correlation 1, client id "probe", no tags; then topics
    return bytes.fromhex("0003000900000001000570726f626500") + count_varint


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@pytest.mark.parametrize("count", [2**32 - 2, 2**31, 2**30, 2**20, 3])
def test_a_count_larger_than_the_bytes_left_is_refused(count: int) -> None:
    frame = metadata_v9(uvarint(count + 1))
    with pytest.raises(MalformedFrame, match="cannot fit"):
        check_request(frame, 3, 9)


def test_the_reported_frame_is_refused_without_kio_allocating() -> None:
    """The issue's 25-byte frame: kio alone aborts the process (checked in a child)."""
    hexframe = "000000150003000900000001000570726f626500feffffff0f"
    frame = bytes.fromhex(hexframe)[4:]
    with pytest.raises(MalformedFrame):
        check_request(frame, 3, 9)
    with pytest.raises(ProtocolError, match="cannot fit"):
        decode_request_as(frame, 3, 9)
    # Without the guard kio itself dies: this is what the guard is for.
    code = (
        "import sys; from kio.serial import entity_reader; "
        "from kio.index import load_request_schema as l; c = l(3, 9); "
        f"f = bytes.fromhex('{hexframe}')[4:]; "
        "h, n = entity_reader(c.__header_schema__)(f, 0); entity_reader(c)(f, n)"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert child.returncode != 0


def test_null_in_a_non_nullable_array_is_refused() -> None:
    # CreateTopics v5 (flexible): topics is not nullable; compact null is a 0 count.
    header = bytes.fromhex("0013000500000001000170") + b"\x00"
    with pytest.raises(MalformedFrame, match="topics: null"):
        check_request(header + b"\x00", 19, 5)


def test_null_in_a_non_nullable_string_is_refused() -> None:
    # FindCoordinator v1 (classic): key is an int16-length string, -1 is null.
    frame = bytes.fromhex("000a000100000001000170ffff00")
    with pytest.raises(MalformedFrame, match="key: null"):
        check_request(frame, 10, 1)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(REQUESTS), st.data())
def test_a_mutated_frame_is_walked_or_refused_never_crashes(
    request: tuple[int, int], data: st.DataObject
) -> None:
    key, version = request
    cls = load_request_schema(key, version)
    frame = bytearray(encode_request_with_kio(1, filled(cls), "c")[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(8, len(frame) - 1))
        frame[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(8, len(frame)))
    try:
        end = walk_request(bytes(frame[:cut]), key, version)
    except MalformedFrame:
        return
    assert end <= cut
