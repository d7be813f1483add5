"""Checking a request frame's shape before kio decodes it.

kio's compiled reader trusts every array count: it reserves room for the claimed
number of elements before reading them, so a 25-byte frame whose compact array
count says ~4 billion makes it allocate ~34 GB and abort the whole process (an
allocation failure in native code is not a Python exception). This module walks a
frame along its schema without building anything and refuses, as a
``ProtocolError``, any frame where

* an array count, string or bytes length claims more than the bytes left (every
  array element takes at least its minimum encoded size),
* a non-nullable string, bytes or array is sent as null (Kafka's own parser
  rejects these too; let through, they reach handlers as ``None``),
* a tagged field's size runs past its struct, or a tag is repeated or out of order.

A walk costs a few microseconds per request. ``codec.decode_request_as`` runs it on
every frame before kio: one guard where frames are decoded, not one per handler.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

Walk = Callable[[bytes, int, int], int]
"""(frame, position, end) -> position after the value; raises :class:`MalformedFrame`."""

FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "datetime_i64": 8,
    "timedelta_i64": 8,
    "float64": 8,
    "uuid": 16,
}
VARIABLE = ("string", "bytes", "records")


class MalformedFrame(ValueError):
    """A frame whose lengths, counts or nulls do not fit its schema (the codec turns
    it into a ``ProtocolError``, which closes the connection)."""


def _uvarint(frame: bytes, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedFrame("a varint runs past the end of its frame")
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedFrame("a varint is longer than five bytes")


def _count(frame: bytes, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array count, string or bytes length: -1 for null."""
    if flexible:
        if pos < end and frame[pos] < 0x80:  # the usual one-byte varint
            return frame[pos] - 1, pos + 1
        value, pos = _uvarint(frame, pos, end)
        return value - 1, pos
    if end - pos < 4:
        raise MalformedFrame("a length runs past the end of its frame")
    return _I32(frame, pos)[0], pos + 4


def _string_length(frame: bytes, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        return _count(frame, pos, end, True)
    if end - pos < 2:
        raise MalformedFrame("a string length runs past the end of its frame")
    return _I16(frame, pos)[0], pos + 2


def _sized(name: str, kafka_type: str, nullable: bool, flexible: bool) -> Walk:
    """A string, bytes or records value."""
    length_of = _string_length if kafka_type == "string" else _count

    def walk(frame: bytes, pos: int, end: int) -> int:
        if flexible and pos < end and frame[pos] > 1 and frame[pos] < 0x80:
            length = frame[pos] - 1  # the usual one-byte, non-null length
            pos += 1
        else:
            length, pos = length_of(frame, pos, end, flexible)
            if length < 0:
                if length == -1 and nullable:
                    return pos
                kind = "null" if length == -1 else "negative"
                raise MalformedFrame(f"{name}: {kind} length")
        if length > end - pos:
            raise MalformedFrame(f"{name}: length {length} exceeds the {end - pos} bytes left")
        return pos + length

    return walk


def _fixed(size: int) -> Walk:
    def walk(frame: bytes, pos: int, end: int) -> int:
        if end - pos < size:
            raise MalformedFrame("a field runs past the end of its frame")
        return pos + size

    return walk


def _array(name: str, element: Walk | None, element_min: int, nullable: bool, flex: bool) -> Walk:
    """An array; ``element`` None means fixed-size elements of ``element_min`` bytes."""

    def walk(frame: bytes, pos: int, end: int) -> int:
        count, pos = _count(frame, pos, end, flex)
        if count < 0:
            if count == -1 and nullable:
                return pos
            raise MalformedFrame(f"{name}: {'null' if count == -1 else 'negative'} count")
        if count * element_min > end - pos:
            raise MalformedFrame(f"{name}: {count} elements cannot fit in {end - pos} bytes")
        if element is None:
            return pos + count * element_min
        for _ in range(count):
            pos = element(frame, pos, end)
        return pos

    return walk


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    walk: Walk
    min_size: int
    fixed: bool = False
    """Always ``min_size`` bytes (the walk only checks they are there)."""


def _field_plan(field: dataclasses.Field[Any], flexible: bool) -> _Plan:
    name = field.name
    nullable = is_optional(field)
    kind = classify_field(field)
    kafka_type = field.metadata.get("kafka_type")
    if isinstance(kind, EntityField):
        inner = _entity_plan(kind.type_)
        if nullable:  # a nullable struct: an int8 presence marker first
            return _Plan(_nullable_struct(name, inner.walk), 1)
        return inner
    if isinstance(kind, EntityTupleField):
        inner = _entity_plan(kind.type_)
        walk = _array(name, inner.walk, max(inner.min_size, 1), nullable, flexible)
        return _Plan(walk, 1 if flexible else 4)
    assert isinstance(kind, PrimitiveField | PrimitiveTupleField)
    if kafka_type in FIXED_SIZES:
        size = FIXED_SIZES[kafka_type]
        if isinstance(kind, PrimitiveTupleField):
            return _Plan(_array(name, None, size, nullable, flexible), 1 if flexible else 4)
        return _Plan(_fixed(size), size, fixed=True)
    if kafka_type in VARIABLE:
        element = _sized(name, kafka_type, nullable and not kind.is_array, flexible)
        if isinstance(kind, PrimitiveTupleField):
            return _Plan(_array(name, element, 1, nullable, flexible), 1 if flexible else 4)
        return _Plan(element, 1 if flexible else 2)
    raise TypeError(f"{name}: no size rule for kafka_type {kafka_type!r}")


def _nullable_struct(name: str, inner: Walk) -> Walk:
    def walk(frame: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise MalformedFrame(f"{name}: runs past the end of its frame")
        marker = frame[pos]
        if marker == 0xFF:  # int8 -1: null
            return pos + 1
        if marker != 1:
            raise MalformedFrame(f"{name}: presence marker {marker}")
        return inner(frame, pos + 1, end)

    return walk


def _tagged_section(cls_name: str, tagged: dict[int, Walk]) -> Walk:
    def walk(frame: bytes, pos: int, end: int) -> int:
        if pos < end and frame[pos] == 0:  # no tagged fields: the usual case
            return pos + 1
        count, pos = _uvarint(frame, pos, end)
        if count * 2 > end - pos:  # each tag takes a tag and a size byte at least
            raise MalformedFrame(f"{cls_name}: {count} tagged fields cannot fit")
        last = -1
        for _ in range(count):
            tag, pos = _uvarint(frame, pos, end)
            size, pos = _uvarint(frame, pos, end)
            if tag <= last:
                raise MalformedFrame(f"{cls_name}: tag {tag} out of order")
            last = tag
            if size > end - pos:
                raise MalformedFrame(f"{cls_name}: tag {tag} of {size} bytes runs past the end")
            known = tagged.get(tag)
            if known is not None:
                known(frame, pos, pos + size)
            pos += size
        return pos

    return walk


def _sequence(steps: list[tuple[Walk | None, int]]) -> Walk:
    """The steps of a struct, with each run of fixed-size fields (walk None) merged
    into one bounds check."""
    merged: list[Walk] = []
    fixed = 0
    for step, size in steps:
        if step is None:
            fixed += size
            continue
        if fixed:
            merged.append(_fixed(fixed))
            fixed = 0
        merged.append(step)
    if fixed:
        merged.append(_fixed(fixed))
    if len(merged) == 1:
        return merged[0]
    if len(merged) == 2:
        first, second = merged

        def walk2(frame: bytes, pos: int, end: int) -> int:
            return second(frame, first(frame, pos, end), end)

        return walk2
    run = tuple(merged)

    def walk(frame: bytes, pos: int, end: int) -> int:
        for step in run:
            pos = step(frame, pos, end)
        return pos

    return walk


@cache
def _entity_plan(cls: type) -> _Plan:
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    steps: list[tuple[Walk | None, int]] = []
    tagged: dict[int, Walk] = {}
    min_size = 0
    for field in dataclasses.fields(cls):
        plan = _field_plan(field, flexible)
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = plan.walk
            continue
        steps.append((None if plan.fixed else plan.walk, plan.min_size))
        min_size += plan.min_size
    if flexible:
        steps.append((_tagged_section(cls.__name__, tagged), 1))
        min_size += 1
    if not steps:
        return _Plan(_fixed(0), 0, fixed=True)
    return _Plan(_sequence(steps), min_size)


_HEADER_FIXED = 8  # api key, api version, correlation id
_NO_TAGS: dict[int, Walk] = {}


def _header_end(frame: bytes, flexible: bool) -> int:
    """Where the request header ends. Its client id is a classic nullable string even
    in the flexible header (v2), which then has a tagged-field section."""
    end = len(frame)
    pos = _sized("client_id", "string", True, False)(frame, _HEADER_FIXED, end)
    if flexible:
        pos = _tagged_section("RequestHeader", _NO_TAGS)(frame, pos, end)
    return pos


def request_guard(cls: Any) -> Callable[[bytes], int]:
    """The check for frames of one kio request class: it raises
    :class:`MalformedFrame` unless the frame's lengths, counts and nulls fit the
    schema, and returns where the body ends (bytes after it are allowed, as Kafka
    allows them: see ``codec.decode_request_as``)."""
    flexible_header = bool(cls.__header_schema__.__flexible__)
    walk = _entity_plan(cls).walk

    def check(frame: bytes) -> int:
        end = len(frame)
        return walk(frame, _header_end(frame, flexible_header), end)

    return check


__all__ = ["MalformedFrame", "request_guard"]
