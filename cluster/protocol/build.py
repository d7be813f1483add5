"""Build kio message entities from plain, version-agnostic dictionaries.

kio generates one frozen dataclass per API version, and fields come and go between
versions. Handlers describe a response once, as nested dicts holding the union of
the fields of every version they serve; :func:`make` keeps the fields that the
target class (one specific version) has, fills the rest with Kafka's defaults and
converts plain ints into the typed values kio writes (error codes, timedeltas).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from .codec import per_class

E = TypeVar("E")

ZERO_UUID = uuid.UUID(int=0)

_MISSING = dataclasses.MISSING


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str
    kind: str  # "entity" | "entity_tuple" | "primitive_tuple" | "primitive"
    inner: Any
    optional: bool
    default: Any


@per_class
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        klass = classify_field(f)
        if isinstance(klass, EntityTupleField):
            kind, inner = "entity_tuple", klass.type_
        elif isinstance(klass, EntityField):
            kind, inner = "entity", klass.type_
        elif isinstance(klass, PrimitiveTupleField):
            kind, inner = "primitive_tuple", klass.type_
        else:
            kind, inner = "primitive", klass.type_
        if f.default is not _MISSING:
            default = f.default
        elif f.default_factory is not _MISSING:
            default = f.default_factory()
        else:
            default = _MISSING
        plans.append(
            _FieldPlan(
                name=f.name,
                kafka_type=get_schema_field_type(f)
                if kind == "primitive" or kind == "primitive_tuple"
                else "",
                kind=kind,
                inner=inner,
                optional=is_optional(f),
                default=default,
            )
        )
    return tuple(plans)


def _zero(plan: _FieldPlan) -> Any:
    """Kafka's default for a field the caller did not give and the schema has no default for."""
    if plan.optional:
        return None
    if plan.kind in ("entity_tuple", "primitive_tuple"):
        return ()
    if plan.kind == "entity":
        return make(plan.inner, {})
    t = plan.kafka_type
    if t == "error_code":
        return ErrorCode.none
    if t in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if t == "string":
        return ""
    if t == "bool":
        return False
    if t in ("bytes", "records"):
        return b""
    if t == "uuid":
        return ZERO_UUID
    if t == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
    return 0


def _convert_primitive(kafka_type: str, value: Any) -> Any:
    if value is None:
        return None
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and not isinstance(
        value, datetime.timedelta
    ):
        return datetime.timedelta(milliseconds=int(value))
    if kafka_type == "datetime_i64" and not isinstance(value, datetime.datetime):
        return datetime.datetime.fromtimestamp(int(value) / 1000, tz=datetime.UTC)
    return value


def make(cls: type[E], data: Mapping[str, Any] | E | None = None, /, **fields: Any) -> E:
    """Construct ``cls`` (a kio entity of one version) from a dict and/or keywords.

    Nested entities and arrays of entities may be given as dicts (converted
    recursively) or as ready entities. Keys the class does not have are ignored, so
    one description serves every version of a message.
    """
    if data is not None and not isinstance(data, Mapping):
        if type(data) is cls:
            return data
        data = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}  # type: ignore[arg-type]
    merged: dict[str, Any] = dict(data or {})
    merged.update(fields)
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name in merged:
            value = merged[plan.name]
            if value is None:
                kwargs[plan.name] = None if plan.optional else _zero(plan)
            elif plan.kind == "entity_tuple":
                kwargs[plan.name] = tuple(make(plan.inner, item) for item in value)
            elif plan.kind == "entity":
                kwargs[plan.name] = make(plan.inner, value)
            elif plan.kind == "primitive_tuple":
                kwargs[plan.name] = tuple(_convert_primitive(plan.kafka_type, v) for v in value)
            else:
                kwargs[plan.name] = _convert_primitive(plan.kafka_type, value)
        elif plan.default is not _MISSING:
            continue
        else:
            kwargs[plan.name] = _zero(plan)
    return cls(**kwargs)


def has_field(cls: type, name: str) -> bool:
    """Whether this version of a message has the field ``name``."""
    return any(p.name == name for p in _plan(cls))
