"""The typed strategy: valid frames whose field values are hostile.

The byte mutators (:mod:`.mutators`) mostly test the decoder: a flipped bit or a lying
length is refused before a handler runs. The typed strategy builds every case as a frame
that decodes, from the same kio schema and plausible values as the seeds, then replaces one
to three fields (chosen by their path in the request) with values a careless handler trusts:

* integers at their type's extremes, negative sizes, timeouts and offsets, isolation levels
  and acks no client sends, partitions the topic does not have;
* producer ids and epochs of *other* producers (ones the cluster really issued, learned at
  start with InitProducerId, see :func:`learn_producers`), so a request names someone
  else's producer;
* strings with control characters, a forged log line, 249/250 and 32,767 characters,
  non-ASCII, internal topic names, ``..``; regular expressions for patterns (nested
  quantifiers, huge repeats, unbalanced brackets); topic config names and values that
  Kafka's LogConfig refuses;
* record batches that contradict their header, transactional batches of other producers,
  control batches, undecodable compressed payloads, far-future timestamps;
* arrays emptied, doubled or repeated a hundred times; fresh and all-ones UUIDs.

A case is named by its seed and case id like a byte case (``make_typed_case`` is a pure
function of them and the context); ``mutators`` says ``typed:<field path>`` for each
field it replaced.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import encode_request, request_class
from ...cluster.protocol.compression import LZ4, ZSTD
from ...cluster.protocol.record_batch import build_control_batch
from ...cluster.protocol.records import encode_batch
from .mutators import Case
from .seeds import (
    CLIENT_ID,
    DELETE_TOPICS,
    DOOMED_TOPIC,
    ZERO_UUID,
    Plausible,
    Seed,
    plausible_values,
)

TYPED_SALT = 0x7E57
MAX_CASE_BYTES = 4 * 1024 * 1024  # larger frames only test socket.request.max.bytes
ATTEMPTS = 8  # draws before a case falls back to its plain seed (values kio cannot encode)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "timedelta_i32": (-(2**31), 2**31 - 1),
    "timedelta_i64": (-(2**63), 2**63 - 1),
    "datetime_i64": (-(2**63), 2**63 - 1),
}
FORGED_LINE = "x\n2026-01-01 00:00:00 ERROR forged log line\r\n\x1b[31mred\x1b[0m"
STRINGS = (
    "",
    "\x00",
    " ",
    FORGED_LINE,
    "é中文\u202e",
    "..",
    ".",
    "../../etc/passwd",
    "__consumer_offsets",
    "__transaction_state",
    "a" * 249,
    "a" * 250,
    "x" * 32_767,
    "%s%n{}",
)
PATTERNS = ("(a+)+b", "(x+x+)+y", "a{99999999999}", "a{1,1001}", "(", "[", ".*", "\\", "")
CONFIG_NAMES = (
    "segment.ms",
    "segment.bytes",
    "retention.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "cleanup.policy",
    "compression.type",
    "no.such.config",
    "",
)
CONFIG_VALUES = ("0", "-1", "-5", "1", "3000000000", "99999999999999999999", "nan", "1e9", "", "x")
NAMED_INTS = {
    "isolation_level": (0, 1, 2, -1, 127, -128),
    "acks": (0, 1, -1, 2, -2, 32_767),
    "partition_index": (-1, 3, 1000, 2**31 - 1, -(2**31)),
    "partition": (-1, 3, 1000, 2**31 - 1, -(2**31)),
    "max_bytes": (0, -1, 1, 2**31 - 1),
    "partition_max_bytes": (0, -1, 1, 2**31 - 1),
    "max_wait": (-1, 0, 2**31 - 1),
    "timeout": (-1, 0, 2**31 - 1),
    "transaction_timeout": (-1, 0, 1, 2**31 - 1),
    "fetch_offset": (-1, -2, 2**62, 2**63 - 1),
    "offset": (-1, -2, 2**62),
    "committed_offset": (-1, -2, 2**62),
    "num_partitions": (-1, 0, 10_001, 2**31 - 1),
    "replication_factor": (-1, 0, 2, 32_767),
    "coordinator_epoch": (-1, 2**31 - 1),
    "generation_id": (-1, 2**31 - 1),
}


@dataclass(frozen=True)
class TypedContext:
    """What typed values may name: the cluster's plausible values and producers (id,
    epoch) it really issued (to name other producers in requests)."""

    plausible: Plausible = field(default_factory=Plausible)
    producers: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class _Field:
    path: tuple[str | int, ...]
    kafka_type: str
    kind: str  # "primitive", "primitive_tuple", "entity_tuple"


def _fields(cls: type, values: dict[str, Any], prefix: tuple[str | int, ...]) -> list[_Field]:
    out = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        path = (*prefix, f.name)
        if isinstance(kind, EntityTupleField):
            out.append(_Field(path, "", "entity_tuple"))
            if values.get(f.name):
                out += _fields(kind.type_, values[f.name][0], (*path, 0))
        elif isinstance(kind, EntityField):
            if isinstance(values.get(f.name), dict):
                out += _fields(kind.type_, values[f.name], path)
        elif isinstance(kind, PrimitiveTupleField):
            out.append(_Field(path, get_schema_field_type(f), "primitive_tuple"))
        else:
            out.append(_Field(path, get_schema_field_type(f), "primitive"))
    return out


def _records(rng: random.Random, ctx: TypedContext) -> bytes:
    pid, epoch = rng.choice(ctx.producers) if ctx.producers else (rng.randrange(1000), 0)
    roll = rng.randrange(9)
    if roll == 0:  # another producer's transaction
        return encode_batch(
            [b"hostile"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
    if roll == 1:  # a sequence at the end of its range
        return encode_batch([b"s"], producer_id=pid, producer_epoch=epoch, base_sequence=2**31 - 1)
    if roll == 2:  # a header that claims 2^31-1 records
        batch = bytearray(encode_batch([b"one"]))
        batch[23:27] = (2**31 - 2).to_bytes(4, "big")
        batch[57:61] = (2**31 - 1).to_bytes(4, "big")
        return bytes(batch)  # (CRC now wrong, or not: either way refused)
    if roll == 3:
        return build_control_batch(pid, epoch, 0, rng.random() < 0.5, 0)
    if roll == 4:  # compressed payload that is not
        batch = bytearray(encode_batch([b"z" * 40], compression=rng.choice((LZ4, ZSTD))))
        batch[61:] = bytes(len(batch) - 61)
        return bytes(batch)
    if roll == 5:
        return encode_batch([b"future"], timestamp_ms=2**62)
    if roll == 6:
        return encode_batch([b"a"]) + encode_batch([b"b"])
    if roll == 7:
        return b""
    return encode_batch([(None, None)] * rng.choice((1, 500)))


def _hostile(rng: random.Random, f: _Field, ctx: TypedContext) -> Any:
    name = next((p for p in reversed(f.path) if isinstance(p, str)), "")
    in_configs = any(p in ("configs", "config", "resources") for p in f.path if isinstance(p, str))
    t = f.kafka_type
    if t == "string":
        if name == "transactional_id_pattern":
            return rng.choice(PATTERNS)
        if in_configs and name == "name":
            return rng.choice(CONFIG_NAMES)
        if in_configs and name == "value":
            return rng.choice(CONFIG_VALUES)
        if name in ("transactional_id", "transactional_ids") and rng.random() < 0.4:
            return rng.choice(("fuzz-txn", "other-txn", ctx.plausible.transactional_id))
        return rng.choice(STRINGS) if rng.random() < 0.9 else None
    if t in INT_RANGES:
        low, high = INT_RANGES[t]
        other = rng.choice(ctx.producers) if ctx.producers and rng.random() < 0.7 else None
        if other is not None and name in ("producer_id", "v3_and_below_producer_id"):
            return other[0]
        if other is not None and name in ("producer_epoch", "v3_and_below_producer_epoch"):
            return rng.choice((other[1], other[1] + 1, other[1] - 1))
        if name in NAMED_INTS and rng.random() < 0.7:
            return rng.choice(NAMED_INTS[name])
        return rng.choice((low, high, -1, 0, 1, high - 1, low + 1, rng.randint(low, high)))
    if t == "bool":
        return rng.random() < 0.5
    if t == "uuid":
        return rng.choice((uuid.uuid4(), uuid.UUID(int=2**128 - 1), uuid.UUID(int=0)))
    if t == "float64":
        return rng.choice((math.nan, math.inf, -math.inf, -1.0, 1e308))
    if t == "records":
        return _records(rng, ctx)
    if t == "bytes":
        return rng.choice((b"", None, rng.randbytes(rng.choice((1, 17, 4096)))))
    return None


def _set(values: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = values
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value


def _get(values: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    node: Any = values
    for step in path:
        node = node[step]
    return node


def _mutate(rng: random.Random, values: dict[str, Any], f: _Field, ctx: TypedContext) -> None:
    if f.kind == "entity_tuple":
        current = _get(values, f.path) or []
        roll = rng.random()
        if roll < 0.3 or not current:
            _set(values, f.path, [])
        elif roll < 0.7 or len(current) > 2:  # (x100 of an array grown before: too big)
            _set(values, f.path, current + copy.deepcopy(current))
        else:
            _set(values, f.path, current * 100)
        return
    element = _hostile(rng, f, ctx)
    if f.kind == "primitive_tuple":
        roll = rng.random()
        if roll < 0.2:
            _set(values, f.path, [])
        else:
            _set(values, f.path, [element] * rng.choice((1, 2, 100)))
        return
    _set(values, f.path, element)


def make_typed_case(
    corpora: Sequence[Sequence[Seed]], ctx: TypedContext, seed: int, case_id: int
) -> Case:
    """Case ``case_id`` of the typed run with ``seed``: a node, one of its seeds' API and
    version, and a valid frame of it with one to three fields set to hostile values."""
    rng = random.Random((seed * 2**40 + case_id) ^ TYPED_SALT)
    node = rng.randrange(len(corpora))
    base = rng.choice(corpora[node])
    correlation_id = case_id & 0x7FFFFFFF
    cls = request_class(base.api_key, base.api_version)
    plausible = ctx.plausible
    if base.api_key == DELETE_TOPICS:  # as its seeds: never the fuzz topic, by name or id
        plausible = dataclasses.replace(plausible, topic=DOOMED_TOPIC, topic_id=ZERO_UUID)
    original = plausible_values(cls, plausible)
    for _ in range(ATTEMPTS):
        values = copy.deepcopy(original)
        changed: list[str] = []
        for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 3)):
            fields = _fields(cls, values, ())
            if not fields:
                break
            f = rng.choice(fields)
            _mutate(rng, values, f, ctx)
            changed.append("typed:" + ".".join(str(p) for p in f.path))
        try:
            data = encode_request(correlation_id, make(cls, values), CLIENT_ID)
        except Exception:  # a value this field's type cannot carry: draw again
            continue
        if len(data) > MAX_CASE_BYTES:
            continue
        names = tuple(changed) or ("typed:no-fields",)  # ApiVersions v0-2
        return Case(case_id, seed, node, base.api_key, base.api_version, names, data, True)
    data = len(base.body).to_bytes(4, "big") + base.body[:4]
    data += correlation_id.to_bytes(4, "big") + base.body[8:]
    return Case(case_id, seed, node, base.api_key, base.api_version, ("typed:none",), data, True)


__all__ = ["TypedContext", "make_typed_case"]
