"""A history as the reference checkers read it: operations with their items, in the schema's
own terms (:mod:`rundir.schema`): one :class:`Op` per JSON Lines completion line, its
fields those of ``OP_FIELDS``, its items those of ``ITEM_FIELDS``, its type, outcome and
isolation the schema's enums.  Read from the compacted flat Parquet form by regrouping rows by
``(process, op_id)``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...rundir.compact import flatten_ops, sort_history, write_history_parquet
from ...rundir.schema import OP_ARROW_SCHEMA, EventType, Isolation, Outcome

TP = tuple[str, int]  #: (topic, partition)
Place = tuple[str, int, int]  #: (topic, partition, offset)


@dataclass(frozen=True)
class Item:
    """One item of an operation (``ITEM_FIELDS``)."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    value: str | None = None
    key: str | None = None
    source: str | None = None

    @property
    def tp(self) -> TP | None:
        return (
            None if self.topic is None or self.partition is None else (self.topic, self.partition)
        )

    @property
    def place(self) -> Place | None:
        tp = self.tp
        return None if tp is None or self.offset is None else (*tp, self.offset)


@dataclass(frozen=True)
class Op:
    """One operation (``OP_FIELDS`` plus its items, in order)."""

    process: str
    op_id: int
    type: EventType
    invoke_ns: int
    outcome: Outcome | None = None
    complete_ns: int | None = None
    error: str | None = None
    transactional_id: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    txn: int | None = None
    group_id: str | None = None
    isolation: Isolation | None = None
    items: tuple[Item, ...] = ()

    @property
    def read_committed(self) -> bool:
        """A read whose records count as read_committed observations (null isolation: yes)."""
        return self.isolation in (None, Isolation.READ_COMMITTED)


ITEM_KEYS = ("topic", "partition", "offset", "value", "key", "source")
OP_KEYS = (
    "process",
    "op_id",
    "type",
    "invoke_ns",
    "outcome",
    "complete_ns",
    "error",
    "transactional_id",
    "producer_id",
    "producer_epoch",
    "txn",
    "group_id",
    "isolation",
)


def op_from_dict(d: Mapping[str, Any], items: Iterable[Mapping[str, Any]] = ()) -> Op:
    """An :class:`Op` from a JSON Lines object or a flat row (its op fields), with ``items``."""
    fields: dict[str, Any] = {k: d.get(k) for k in OP_KEYS}
    fields["type"] = EventType(fields["type"])
    if fields["outcome"] is not None:
        fields["outcome"] = Outcome(fields["outcome"])
    if fields["isolation"] is not None:
        fields["isolation"] = Isolation(fields["isolation"])
    its = tuple(Item(**{k: it.get(k) for k in ITEM_KEYS}) for it in items)
    return Op(**fields, items=its)


def ops_from_flat(table: pa.Table) -> list[Op]:
    """Ops from the flat history (one row per item; ``item`` null for an op without items),
    in the order of their first row, items in ``item`` order."""
    return ops_from_rows(table.to_pylist())


def ops_from_rows(flat: Iterable[Mapping[str, Any]]) -> list[Op]:
    """Ops from the flat history's rows (see :func:`ops_from_flat`)."""
    rows: dict[tuple[str, int], tuple[Mapping[str, Any], list[tuple[int, Mapping[str, Any]]]]] = {}
    for r in flat:
        key = (r["process"], r["op_id"])
        entry = rows.get(key)
        if entry is None:
            entry = rows[key] = (r, [])
        if r["item"] is not None:
            entry[1].append((r["item"], r))
    return [
        op_from_dict(r, (it for _, it in sorted(items, key=lambda x: x[0])))
        for r, items in rows.values()
    ]


def read_history(path: str | os.PathLike[str]) -> list[Op]:
    """The ops of a ``history.parquet`` file."""
    return ops_from_flat(pq.read_table(path))


def op_to_dict(op: Op) -> dict[str, Any]:
    """The JSON Lines form of an op (enums as their strings)."""
    d: dict[str, Any] = {k: getattr(op, k) for k in OP_KEYS}
    for k in ("type", "outcome", "isolation"):
        if d[k] is not None:
            d[k] = d[k].value
    d["items"] = [{k: getattr(it, k) for k in ITEM_KEYS} for it in op.items] or None
    return d


def write_history(ops: Iterable[Op], path: str | os.PathLike[str]) -> None:
    """Ops as a ``history.parquet`` file (the flat, sorted form the analysis reads)."""
    nested = pa.Table.from_pylist([op_to_dict(op) for op in ops], schema=OP_ARROW_SCHEMA)
    write_history_parquet(sort_history(flatten_ops(nested)), path)
