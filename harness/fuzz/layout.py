"""Where the lengths, counts and integers of a valid request frame are.

The mutators lie about lengths in place (a count that claims more elements than there
are, a huge varint, a null where the schema allows none); they need to know which bytes
hold a length. This walks a frame that is known to be valid (a seed) along its kio
schema and lists those places.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, NamedTuple

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from ...cluster.protocol.frame_guard import FIXED_SIZES

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class Slot(NamedTuple):
    """A length or count (``kind`` len16, len32 or uvarint: a compact length, stored
    plus one) or a fixed-size integer (``int``) at ``offset``, ``width`` bytes wide."""

    offset: int
    kind: str
    width: int
    nullable: bool


class _Walker:
    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.slots: list[Slot] = []

    def uvarint(self, pos: int) -> tuple[int, int]:
        value = shift = 0
        start = pos
        while True:
            byte = self.frame[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos - start
            shift += 7

    def length(
        self, pos: int, flexible: bool, classic_width: int, nullable: bool
    ) -> tuple[int, int]:
        """A length or count at ``pos``: (value, -1 for null; position after it)."""
        if flexible:
            value, width = self.uvarint(pos)
            self.slots.append(Slot(pos, "uvarint", width, nullable))
            return value - 1, pos + width
        kind = "len16" if classic_width == 2 else "len32"
        fmt = _I16 if classic_width == 2 else _I32
        self.slots.append(Slot(pos, kind, classic_width, nullable))
        return fmt.unpack_from(self.frame, pos)[0], pos + classic_width

    def sized(self, pos: int, kafka_type: str, flexible: bool, nullable: bool) -> int:
        n, pos = self.length(pos, flexible, 2 if kafka_type == "string" else 4, nullable)
        return pos + max(n, 0)

    def entity(self, cls: Any, pos: int) -> int:
        flexible = bool(cls.__flexible__)
        for f in dataclasses.fields(cls):
            if f.metadata.get("tag") is not None:
                continue  # seeds send no tagged fields
            pos = self.field(f, pos, flexible)
        if flexible:
            count, width = self.uvarint(pos)
            self.slots.append(Slot(pos, "tags", width, False))
            pos += width
            if count:
                raise ValueError("seeds carry no tagged fields")
        return pos

    def field(self, f: dataclasses.Field[Any], pos: int, flexible: bool) -> int:
        kind = classify_field(f)
        nullable = is_optional(f)
        if isinstance(kind, EntityField):
            if nullable:
                present = self.frame[pos] != 0xFF
                pos += 1
                return self.entity(kind.type_, pos) if present else pos
            return self.entity(kind.type_, pos)
        if isinstance(kind, EntityTupleField):
            count, pos = self.length(pos, flexible, 4, nullable)
            for _ in range(max(count, 0)):
                pos = self.entity(kind.type_, pos)
            return pos
        kafka_type = get_schema_field_type(f)
        if isinstance(kind, PrimitiveTupleField):
            count, pos = self.length(pos, flexible, 4, nullable)
            for _ in range(max(count, 0)):
                pos = self.primitive(kafka_type, pos, flexible, False)
            return pos
        return self.primitive(kafka_type, pos, flexible, nullable)

    def primitive(self, kafka_type: str, pos: int, flexible: bool, nullable: bool) -> int:
        size = FIXED_SIZES.get(kafka_type)
        if size is not None:
            if size in (2, 4, 8) and kafka_type != "uuid":
                self.slots.append(Slot(pos, "int", size, False))
            return pos + size
        return self.sized(pos, kafka_type, flexible, nullable)


def layout_of(cls: Any, frame: bytes) -> tuple[Slot, ...]:
    """The slots of ``frame``, a valid request of kio class ``cls`` (no size prefix),
    header included (its client id length is the first slot)."""
    walker = _Walker(frame)
    pos = walker.sized(8, "string", False, True)  # client id: always a classic string
    if cls.__header_schema__.__flexible__:
        pos += 1  # the header's empty tagged section
    end = walker.entity(cls, pos)
    if end != len(frame):
        raise ValueError(f"{cls.__name__}: walked {end} of {len(frame)} bytes")
    return tuple(walker.slots)


__all__ = ["Slot", "layout_of"]
