"""Compaction: per-process JSON Lines -> one flat ``history.parquet`` (and metrics -> Parquet).

Robust to partial runs, strict about everything else (see :mod:`.jsonl`): a torn line (a
writer killed mid-write) is skipped and *noted*; the notes travel in the Parquet file's
metadata (:data:`NOTES_KEY`, :func:`parquet_notes`) so the verdict records them.  Any other bad
line raises :class:`~.jsonl.CorruptLineError` naming the file and line, and nothing is written.
An invocation line without its completion becomes an ``info`` operation (unknown outcome) with
``complete_ns = null``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from .jsonl import (
    CorruptLineError,
    LineProblem,
    check_fields,
    check_value,
    iter_objects,
    read_bytes,
    split_torn_tail,
)
from .run_dir import (
    FAULTS_JSONL,
    HISTORY_DIR,
    HISTORY_PARQUET,
    METRICS_DIR,
    METRICS_PARQUET,
)
from .schema import (
    FAULT_ARROW_SCHEMA,
    HISTORY_ARROW_SCHEMA,
    ITEM_FIELDS,
    METRIC_ARROW_SCHEMA,
    OP_ARROW_SCHEMA,
    OP_FIELDS,
    EventType,
    Outcome,
    canonical_metric_name,
)

ROW_GROUP_SIZE = 1 << 20
#: Parquet key-value metadata: the notes of the compaction that wrote the file (JSON list)
NOTES_KEY = b"txnchaos.notes"

_OP_SPEC = {f.name: (f.type, f.nullable) for f in OP_FIELDS}
_ITEM_SPEC = {f.name: (f.type, True) for f in ITEM_FIELDS}
_EVENT_TYPES = tuple(t.value for t in EventType)
_OUTCOMES = tuple(o.value for o in Outcome)


@dataclass
class CompactionStats:
    files: int = 0
    #: torn lines skipped (each has a note)
    lines_skipped: int = 0
    unfinished_ops: int = 0
    rows: int = 0
    #: what was skipped, as ``FILE:LINE: ...`` sentences
    notes: list[str] = field(default_factory=list)


def check_op_line(obj: dict[str, Any]) -> None:
    """One history line against the schema (:class:`LineProblem` naming the field)."""
    check_fields(obj, _OP_SPEC)
    if obj["type"] not in _EVENT_TYPES:
        raise LineProblem(f"field 'type' should be an event type, got {obj['type']!r}")
    outcome = obj.get("outcome")
    if outcome is not None and outcome not in _OUTCOMES:
        raise LineProblem(f"field 'outcome' should be ok, fail, info or null, got {outcome!r}")
    items = obj.get("items")
    check_value("items", items, list)
    for i, item in enumerate(items or ()):
        if not isinstance(item, dict):
            raise LineProblem(f"items[{i}] should be an object, got {json.dumps(item)[:40]}")
        for name, (kind, nullable) in _ITEM_SPEC.items():
            check_value(f"items[{i}].{name}", item.get(name), kind, nullable=nullable)


def _has_false(mask: pa.Array | pa.ChunkedArray) -> bool:
    return pc.any(pc.invert(mask)).as_py() is True


def _ops_valid(ops: pa.Table) -> bool:
    """What the fast reader lets through that :func:`check_op_line` would not: text that is
    not UTF-8, nulls in required fields or in ``items``, unknown event types and outcomes."""
    try:
        ops.validate(full=True)  # Arrow's JSON reader keeps invalid UTF-8 in strings
    except pa.ArrowInvalid:
        return False
    if any(ops[f.name].null_count for f in OP_FIELDS if not f.nullable):
        return False
    if _has_false(pc.is_in(ops["type"], value_set=pa.array(_EVENT_TYPES))):
        return False
    outcome = ops["outcome"]
    known = pc.or_kleene(pc.is_null(outcome), pc.is_in(outcome, value_set=pa.array(_OUTCOMES)))
    if _has_false(known):
        return False
    return pc.list_flatten(ops["items"]).null_count == 0


def _read_jsonl_ops(path: Path, stats: CompactionStats) -> pa.Table:
    before = len(stats.notes)
    data = split_torn_tail(path, read_bytes(path), stats.notes)
    if not data or data.isspace():  # (strip() would copy the whole file)
        stats.lines_skipped += len(stats.notes) - before
        return OP_ARROW_SCHEMA.empty_table()
    # fast path: Arrow's reader checks every type; what it lets through is checked after
    try:
        ops = pj.read_json(
            io.BytesIO(data),
            parse_options=pj.ParseOptions(
                explicit_schema=OP_ARROW_SCHEMA, unexpected_field_behavior="ignore"
            ),
            read_options=pj.ReadOptions(block_size=1 << 24),
        ).select(OP_ARROW_SCHEMA.names)
        if _ops_valid(ops):
            stats.lines_skipped += len(stats.notes) - before
            return ops
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    # slow path, line by line: finds the bad line and names it, or skips marked torn lines
    rows: list[dict[str, Any]] = []
    for number, obj in iter_objects(path, data, stats.notes):
        try:
            check_op_line(obj)
        except LineProblem as e:
            raise CorruptLineError(path, number, str(e)) from None
        rows.append(obj)
    stats.lines_skipped += len(stats.notes) - before
    return pa.Table.from_pylist(rows, schema=OP_ARROW_SCHEMA)


def _resolve_invocations(ops: pa.Table, stats: CompactionStats) -> pa.Table:
    """Keep completion lines; turn invocations never completed into ``info`` ops."""
    if ops.num_rows == 0:
        return ops
    is_invoke = pc.is_null(ops["outcome"])
    done = ops.filter(pc.invert(is_invoke))
    invoked = ops.filter(is_invoke)
    if invoked.num_rows == 0:
        return done

    # One file per process, but be safe: key on (process, op_id) via a string key.
    def key(t: pa.Table) -> pa.Array:
        return pc.binary_join_element_wise(t["process"], pc.cast(t["op_id"], pa.string()), "\x00")

    orphan = invoked.filter(pc.invert(pc.is_in(key(invoked), value_set=key(done))))
    stats.unfinished_ops += orphan.num_rows
    if orphan.num_rows:
        orphan = orphan.set_column(
            orphan.schema.get_field_index("outcome"),
            "outcome",
            pa.array([Outcome.INFO.value] * orphan.num_rows, pa.string()),
        )
        return pa.concat_tables([done, orphan])
    return done


def flatten_ops(ops: pa.Table) -> pa.Table:
    """Nested ops (one row per op, ``items`` list) -> flat history (one row per item)."""
    ops = ops.combine_chunks()
    op_names = [f.name for f in OP_FIELDS]
    items = (
        ops["items"].combine_chunks()
        if ops.num_rows
        else pa.array([], OP_ARROW_SCHEMA.field("items").type)
    )
    if isinstance(items, pa.ChunkedArray):
        items = pa.concat_arrays(items.chunks) if items.num_chunks else pa.array([], items.type)
    lengths = pc.fill_null(pc.list_value_length(items), 0)
    parts: list[pa.Table] = []
    parent = pc.list_parent_indices(items)
    flat = pc.list_flatten(items)
    if len(flat):
        starts = pc.take(items.offsets, parent)
        pos = pc.subtract(
            pa.array(range(len(flat)), pa.int64()), pc.subtract(starts, items.offsets[0])
        )
        cols: dict[str, pa.Array] = {n: pc.take(ops[n], parent) for n in op_names}
        cols["item"] = pc.cast(pos, pa.int32())
        for f in ITEM_FIELDS:
            cols[f.name] = flat.field(f.name)
        parts.append(pa.table(cols))
    empty = ops.filter(pc.equal(lengths, 0))
    if empty.num_rows:
        cols = {n: empty[n] for n in op_names}
        cols["item"] = pa.nulls(empty.num_rows, pa.int32())
        for f in ITEM_FIELDS:
            cols[f.name] = pa.nulls(empty.num_rows, f.type)
        parts.append(pa.table(cols))
    if not parts:
        return HISTORY_ARROW_SCHEMA.empty_table()
    out = pa.concat_tables([p.cast(HISTORY_ARROW_SCHEMA, safe=False) for p in parts])
    return out


def sort_history(table: pa.Table) -> pa.Table:
    return table.sort_by(
        [
            ("invoke_ns", "ascending"),
            ("process", "ascending"),
            ("op_id", "ascending"),
            ("item", "ascending"),
        ]
    )


def _with_notes(table: pa.Table, notes: Iterable[str]) -> pa.Table:
    notes = list(notes)
    if not notes:
        return table
    meta = dict(table.schema.metadata or {})
    meta[NOTES_KEY] = json.dumps(notes).encode()
    return table.replace_schema_metadata(meta)


def parquet_notes(path: str | os.PathLike[str]) -> list[str]:
    """The notes the compaction that wrote ``path`` left in its metadata (torn lines
    skipped); an empty list for a file without them."""
    raw = (pq.read_schema(path).metadata or {}).get(NOTES_KEY)
    if raw is None:
        return []
    try:
        notes = json.loads(raw)
    except ValueError:
        return [f"{path}: unreadable compaction notes in its metadata"]
    return [str(n) for n in notes] if isinstance(notes, list) else [str(notes)]


def write_history_parquet(
    table: pa.Table, path: str | os.PathLike[str], notes: Iterable[str] = ()
) -> None:
    table = _with_notes(table.cast(HISTORY_ARROW_SCHEMA), notes)
    tmp = Path(str(path) + ".tmp")
    pq.write_table(table, tmp, row_group_size=ROW_GROUP_SIZE, compression="snappy")
    tmp.replace(path)


def read_history_jsonl(paths: Iterable[Path], stats: CompactionStats | None = None) -> pa.Table:
    """Every history file, flattened and sorted; raises :class:`CorruptLineError` on a bad
    line (torn lines are skipped and noted in ``stats``)."""
    stats = stats or CompactionStats()
    tables = []
    for p in paths:
        stats.files += 1
        tables.append(_resolve_invocations(_read_jsonl_ops(p, stats), stats))
    if not tables:
        return HISTORY_ARROW_SCHEMA.empty_table()
    flat = sort_history(flatten_ops(pa.concat_tables(tables)))
    stats.rows = flat.num_rows
    return flat


_METRIC_SPEC = {
    "time_ns": (pa.int64(), False),
    "node": (pa.string(), True),
    "name": (pa.string(), False),
    "labels": (dict, True),
    "value": (pa.float64(), False),
}


def _metric_row(obj: dict[str, Any], node: str) -> tuple[Any, ...]:
    """One line of ``metrics/<node>.jsonl`` as a metrics row (:class:`LineProblem` if bad)."""
    check_fields(obj, _METRIC_SPEC)
    labels = obj.get("labels") or {}
    for key, value in labels.items():
        check_value(f"labels.{key}", value, pa.string())
    part = labels.get("partition")
    partition = None
    if part is not None:
        try:
            partition = int(part)
            check_value("labels.partition", partition, pa.int32())
        except (ValueError, LineProblem):
            problem = f"label 'partition' should be a partition number, got {part!r}"
            raise LineProblem(problem) from None
    return (
        obj["time_ns"],
        obj.get("node") or node,
        canonical_metric_name(obj["name"]),
        labels.get("topic"),
        partition,
        json.dumps(labels, separators=(",", ":"), sort_keys=True) if labels else None,
        float(obj["value"]),  # NaN and infinities are legitimate Prometheus values
    )


def compact_run(run_dir: str | os.PathLike[str]) -> list[str]:
    """Compact what a run directory holds only as JSON Lines — a run whose harness died before
    it compacted (the harness compacts every run it records): the history into
    history.parquet, the metrics into metrics.parquet. Returns what it compacted, in words
    (nothing: the run was compacted; the torn lines it skipped are noted in the Parquet files,
    and so in the verdict). Raises :class:`CorruptLineError` at a bad line and
    :class:`RunDirError` for a directory that is not a run's."""
    from .run_dir import open_run_dir

    run = open_run_dir(run_dir)
    done: list[str] = []
    if run.history_parquet is None:
        compact_to_parquet(run.path)
        done.append(f"compacted {len(run.history_jsonl)} history file(s) into {HISTORY_PARQUET}")
    elif run.metrics_parquet is None and run.metrics_jsonl:
        compact_metrics(run.path)
        done.append(f"compacted {len(run.metrics_jsonl)} metrics file(s) into {METRICS_PARQUET}")
    return done


def compact_metrics(run_dir: str | os.PathLike[str], notes: list[str] | None = None) -> Path | None:
    """``metrics/*.jsonl`` -> ``metrics.parquet`` (canonical names, topic/partition lifted).
    Raises :class:`CorruptLineError` on a bad line; torn lines are skipped, noted in ``notes``
    and in the file's metadata."""
    root = Path(run_dir)
    files = sorted((root / METRICS_DIR).glob("*.jsonl"))
    if not files:
        return None
    cols: dict[str, list[Any]] = {f.name: [] for f in METRIC_ARROW_SCHEMA}
    found: list[str] = []
    for path in files:
        for number, obj in iter_objects(path, read_bytes(path), found):
            try:
                row = _metric_row(obj, path.stem)
            except LineProblem as e:
                raise CorruptLineError(path, number, str(e)) from None
            for name, v in zip(cols, row, strict=True):
                cols[name].append(v)
    table = _with_notes(pa.table(cols, schema=METRIC_ARROW_SCHEMA), found)
    out = root / METRICS_PARQUET
    tmp = Path(str(out) + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(out)
    if notes is not None:
        notes.extend(found)
    return out


_FAULT_TABLE_SPEC = {
    "start_ns": (pa.int64(), False),
    "end_ns": (pa.int64(), True),
    "target": (pa.string(), True),
    "kind": (pa.string(), True),
    "detail": (pa.string(), True),
}
_FAULT_LOG_SPEC = {
    "kind": (pa.string(), False),
    "start": (pa.float64(), False),
    "end": (pa.float64(), True),
    "link": (pa.string(), True),
    "target": (dict, True),
    "params": (dict, True),
}


def _seconds_ns(name: str, seconds: float) -> int:
    try:
        return int(seconds * 1e9)
    except (OverflowError, ValueError):
        raise LineProblem(f"field {name!r} should be a time in seconds, got {seconds}") from None


def _fault_row(obj: dict[str, Any]) -> dict[str, Any]:
    """One line of ``faults.jsonl`` (written by ``rundir/fault_log.py``: times in
    float seconds, ``target`` and ``params`` objects) as a row of the fault table.
    Lines already in the table's own shape (``start_ns``...) are taken as they are.
    :class:`LineProblem` when a field is missing or of the wrong type."""
    if "start_ns" in obj:
        check_fields(obj, _FAULT_TABLE_SPEC)
        return {name: obj.get(name) for name in _FAULT_TABLE_SPEC}
    check_fields(obj, _FAULT_LOG_SPEC)
    target = obj.get("target") or {}
    link = obj.get("link")
    if link:
        summary = str(link)
    elif "node" in target:
        summary = f"node {target['node']}"
    elif "client" in target:
        summary = f"client {target['client']}"
    else:
        summary = json.dumps(target, sort_keys=True, separators=(",", ":"))
    detail = {"target": target, "params": obj.get("params") or {}}
    end = obj.get("end")
    return {
        "start_ns": _seconds_ns("start", obj["start"]),
        "end_ns": None if end is None else _seconds_ns("end", end),
        "target": summary,
        "kind": obj["kind"],
        "detail": json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str),
    }


def read_faults(run_dir: str | os.PathLike[str], notes: list[str] | None = None) -> pa.Table:
    """``faults.jsonl`` as the fault table (empty without the file).  Raises
    :class:`CorruptLineError` on a bad line; a torn final line is skipped and noted in
    ``notes``."""
    path = Path(run_dir) / FAULTS_JSONL
    rows = []
    found: list[str] = []
    if path.exists():
        for number, obj in iter_objects(path, read_bytes(path), found):
            try:
                rows.append(_fault_row(obj))
            except LineProblem as e:
                raise CorruptLineError(path, number, str(e)) from None
    if notes is not None:
        notes.extend(found)
    return pa.Table.from_pylist(rows, schema=FAULT_ARROW_SCHEMA)


def compact_to_parquet(run_dir: str | os.PathLike[str]) -> CompactionStats:
    """Compact ``history/*.jsonl`` into ``history.parquet`` and ``metrics/*.jsonl`` into
    ``metrics.parquet``.  Idempotent: re-running rewrites both from the JSON Lines.  Raises
    :class:`CorruptLineError` (and writes nothing more) at the first bad line; the notes of
    torn lines skipped are in the returned stats and in each file's metadata."""
    root = Path(run_dir)
    stats = CompactionStats()
    table = read_history_jsonl(sorted((root / HISTORY_DIR).glob("*.jsonl")), stats)
    write_history_parquet(table, root / HISTORY_PARQUET, stats.notes)
    compact_metrics(root, stats.notes)
    return stats
