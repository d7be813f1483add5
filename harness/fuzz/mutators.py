"""Seeded, reproducible mutations of seed frames into fuzz cases.

``make_case(corpus, seed, case_id)`` is a pure function: the same corpus, seed and
case id give the same bytes, so a case found in a long run is named by two numbers
(and saved as hex besides). Every mutator takes a random generator and a frame body
(the bytes after the size prefix) and returns new bytes; a few work on the wire bytes
instead (several frames in one write, a size prefix that lies).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...cluster.protocol.record_batch import uvarint
from .layout import Slot
from .seeds import Seed

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZE = struct.Struct(">i")

LONGEST_CLIENT_ID = 32_767
INTERESTING_8 = (0x00, 0x01, 0x7F, 0x80, 0xFF)
INTERESTING_16 = (0, 1, -1, -2, 0x7FFF, -0x8000, 0x7FFE, 0x100)
INTERESTING_32 = (0, 1, -1, -2, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 0x10000, 0xFFFF, 10_001)
INTERESTING_64 = (0, -1, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000, 0xFFFFFFFF, 2**32)
HUGE_UVARINTS = (2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**35 - 1, 2**63, 2**64 - 1)


@dataclass(frozen=True)
class Case:
    """One fuzz case: the bytes to write (size prefixes included) and how it was made.

    ``single`` means the bytes are exactly one frame with a true size prefix, so the
    node keeps reading the connection afterwards and a response (if any) answers it;
    otherwise the sender half-closes the connection after writing and reads until EOF.
    """

    case_id: int
    seed: int
    node: int
    api_key: int
    api_version: int
    mutators: tuple[str, ...]
    data: bytes
    single: bool

    @property
    def correlation_id(self) -> int | None:
        """The correlation id the (first) frame carries, if it is long enough to carry one."""
        if len(self.data) < 12:
            return None
        return int(_I32.unpack_from(self.data, 8)[0])


Rng = random.Random
BodyMutator = Callable[[Rng, bytes, Seed, Sequence[Seed]], bytes]


def _pick_slot(rng: Rng, seed: Seed, kinds: tuple[str, ...], body: bytes) -> Slot | None:
    slots = [s for s in seed.slots if s.kind in kinds and s.offset + s.width <= len(body)]
    return rng.choice(slots) if slots else None


def _replace(body: bytes, slot: Slot, value: bytes) -> bytes:
    return body[: slot.offset] + value + body[slot.offset + slot.width :]


def bit_flip(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    out = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(out))
        out[pos] ^= 1 << rng.randrange(8)
    return bytes(out)


def byte_set(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    out = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(out))
        out[pos] = rng.choice(INTERESTING_8) if rng.random() < 0.5 else rng.randrange(256)
    return bytes(out)


def truncate(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    return body[: rng.randrange(len(body))]


def length_lie(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    """A length or count that claims more (or other) than what follows: huge uvarints
    (>= 2^31), a few more than there are, the int16/int32 extremes."""
    slot = _pick_slot(rng, seed, ("len16", "len32", "uvarint", "tags"), body)
    if slot is None:
        return bit_flip(rng, body, seed, corpus)
    if slot.kind in ("uvarint", "tags"):
        current, _ = _read_uvarint(body, slot.offset)
        choice = rng.random()
        if choice < 0.5:
            value = rng.choice(HUGE_UVARINTS)
        elif choice < 0.8:
            value = current + rng.randint(1, 64)
        else:
            value = rng.randrange(2**28)
        return _replace(body, slot, _long_uvarint(value))
    if slot.kind == "len16":
        current = _I16.unpack_from(body, slot.offset)[0]
        short: list[int] = [*INTERESTING_16, current + 1, current + rng.randint(2, 1000)]
        return _replace(body, slot, _I16.pack(_wrap(rng.choice(short), 16)))
    current = _I32.unpack_from(body, slot.offset)[0]
    wide: list[int] = [*INTERESTING_32, current + 1, current + rng.randint(2, 10**6)]
    return _replace(body, slot, _I32.pack(_wrap(rng.choice(wide), 32)))


def negative_count(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    """A classic (int32) count or length below -1."""
    slot = _pick_slot(rng, seed, ("len32", "len16"), body)
    if slot is None:
        return length_lie(rng, body, seed, corpus)
    if slot.kind == "len16":
        return _replace(body, slot, _I16.pack(rng.choice((-2, -0x8000, -rng.randint(2, 0x7FFF)))))
    value = rng.choice((-2, -0x80000000, -rng.randint(2, 0x7FFFFFFF)))
    return _replace(body, slot, _I32.pack(value))


def null_where_not_nullable(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    slots = [
        s
        for s in seed.slots
        if s.kind in ("len16", "len32", "uvarint") and s.offset + s.width <= len(body)
    ]
    strict = [s for s in slots if not s.nullable] or slots
    if not strict:
        return bit_flip(rng, body, seed, corpus)
    slot = rng.choice(strict)
    if slot.kind == "uvarint":
        return _replace(body, slot, b"\x00")
    return _replace(body, slot, b"\xff" * slot.width)


def int_splat(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    """A fixed-size integer field (a partition, a timeout, an epoch) set to an extreme."""
    slot = _pick_slot(rng, seed, ("int",), body)
    if slot is None:
        return byte_set(rng, body, seed, corpus)
    if slot.width == 2:
        return _replace(body, slot, _I16.pack(rng.choice(INTERESTING_16)))
    if slot.width == 4:
        return _replace(body, slot, _I32.pack(_wrap(rng.choice(INTERESTING_32), 32)))
    return _replace(body, slot, struct.pack(">q", _wrap(rng.choice(INTERESTING_64), 64)))


def random_api(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    """Another API key and/or version on this body: often one the node serves, with a
    body it does not expect; sometimes any int16."""
    out = bytearray(body)
    roll = rng.random()
    if roll < 0.4:
        other = rng.choice(corpus)
        out[0:4] = struct.pack(">hh", other.api_key, other.api_version)
    elif roll < 0.7:
        out[2:4] = _I16.pack(rng.choice((-1, 0, 1, 2, 50, 0x7FFF, -0x8000, rng.randrange(64))))
    else:
        out[0:2] = _I16.pack(rng.choice((-1, 0x7FFF, -0x8000, rng.randrange(100))))
        out[2:4] = _I16.pack(rng.randrange(-2, 20))
    return bytes(out)


def garbage_tail(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    return body + rng.randbytes(rng.randint(1, 64))


def long_client_id(rng: Rng, body: bytes, seed: Seed, corpus: Sequence[Seed]) -> bytes:
    """The longest client id a header can carry (32,767 bytes), or a lie about it."""
    if len(body) < 10:
        body = seed.body  # cut before the client id by an earlier mutation
    (length,) = _I16.unpack_from(body, 8)
    rest = body[10 + max(length, 0) :]
    roll = rng.random()
    if roll < 0.5:
        client = b"c" * LONGEST_CLIENT_ID
    elif roll < 0.7:
        client = rng.randbytes(LONGEST_CLIENT_ID)  # not UTF-8, most likely
    else:
        return body[:8] + _I16.pack(LONGEST_CLIENT_ID) + rest  # claims it, sends none
    return body[:8] + _I16.pack(len(client)) + client + rest


BODY_MUTATORS: dict[str, BodyMutator] = {
    "bit_flip": bit_flip,
    "byte_set": byte_set,
    "truncate": truncate,
    "length_lie": length_lie,
    "negative_count": negative_count,
    "null": null_where_not_nullable,
    "int_splat": int_splat,
    "random_api": random_api,
    "garbage_tail": garbage_tail,
    "long_client_id": long_client_id,
}
BODY_WEIGHTS = {
    "bit_flip": 12,
    "byte_set": 8,
    "truncate": 6,
    "length_lie": 12,
    "negative_count": 5,
    "null": 6,
    "int_splat": 10,
    "random_api": 6,
    "garbage_tail": 4,
    "long_client_id": 1,
}
WIRE_MUTATORS = ("duplicate", "splice", "size_lie")
"""Mutators of the wire bytes; each makes a case that is not one honest frame."""
WIRE_SHARE = 0.08


def _wrap(value: int, bits: int) -> int:
    """``value`` as a signed integer of ``bits`` bits (two's complement wrap-around)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    return value, pos


def _long_uvarint(value: int) -> bytes:
    """Unsigned varint of any size (past 64 bits too, which no parser should accept)."""
    if value < 2**63:
        return uvarint(value)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _framed(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def _with_correlation(body: bytes, correlation_id: int) -> bytes:
    if len(body) < 8:
        return body
    return body[:4] + _I32.pack(correlation_id) + body[8:]


def _wire(rng: Rng, name: str, body: bytes, corpus: Sequence[Seed]) -> bytes:
    if name == "duplicate":
        return _framed(body) * rng.randint(2, 5)
    if name == "splice":
        other = rng.choice(corpus).body
        cut = rng.randrange(len(body) + 1)
        if rng.random() < 0.5:  # one frame, made of two seeds
            return _framed(body[:cut] + other[rng.randrange(len(other) + 1) :])
        return _framed(body[:cut]) + _framed(other)  # a broken frame, then a valid one
    # size_lie: the prefix claims more or less than the body, or the impossible
    roll = rng.random()
    if roll < 0.4:
        size = len(body) + rng.choice((1, 2, 7, rng.randint(8, 4096)))
        data = _SIZE.pack(size) + body  # the node waits for bytes that never come
    elif roll < 0.7:
        size = max(0, len(body) - rng.randint(1, max(1, len(body))))
        data = _SIZE.pack(size) + body
    else:
        size = rng.choice((-1, -(2**31), 2**31 - 1, 100 * 1024 * 1024 + 1, 100 * 1024 * 1024))
        data = _SIZE.pack(size) + body
    return data


def make_case(corpora: Sequence[Sequence[Seed]], seed: int, case_id: int) -> Case:
    """Case ``case_id`` of the run with ``seed``: a target node (an index into
    ``corpora``, one corpus per node), a seed frame from that node's corpus, one to three
    mutations."""
    rng = random.Random(seed * 2**40 + case_id)
    node = rng.randrange(len(corpora))
    corpus = corpora[node]
    base = rng.choice(corpus)
    correlation_id = case_id & 0x7FFFFFFF
    body = _with_correlation(base.body, correlation_id)
    names: list[str] = []
    for _ in range(1 if rng.random() < 0.75 else rng.randint(2, 3)):
        name = rng.choices(list(BODY_WEIGHTS), weights=list(BODY_WEIGHTS.values()))[0]
        if len(body) == 0:
            break
        body = BODY_MUTATORS[name](rng, body, base, corpus)
        names.append(name)
    if rng.random() < WIRE_SHARE:
        name = rng.choice(WIRE_MUTATORS)
        names.append(name)
        data = _wire(rng, name, body, corpus)
        single = False
    else:
        data = _framed(body)
        single = True
    return Case(
        case_id=case_id,
        seed=seed,
        node=node,
        api_key=base.api_key,
        api_version=base.api_version,
        mutators=tuple(names),
        data=data,
        single=single,
    )


__all__ = ["BODY_MUTATORS", "WIRE_MUTATORS", "Case", "make_case"]
