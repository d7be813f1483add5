"""Compaction: per-process JSON Lines -> one flat ``history.parquet`` (and metrics -> Parquet).

Robust to partial runs: a truncated last line (crash mid-write) is dropped, an unparseable line
is skipped (and counted), and an invocation line without its completion becomes an ``info``
operation (unknown outcome) with ``complete_ns = null``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

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
    Outcome,
    canonical_metric_name,
)

ROW_GROUP_SIZE = 1 << 20


@dataclass
class CompactionStats:
    files: int = 0
    lines_skipped: int = 0
    unfinished_ops: int = 0
    rows: int = 0


def _read_jsonl_ops(path: Path, stats: CompactionStats) -> pa.Table:
    data = path.read_bytes()
    cut = data.rfind(b"\n")
    data = data[: cut + 1] if cut >= 0 else b""
    if not data.strip():
        return OP_ARROW_SCHEMA.empty_table()
    try:
        return pj.read_json(
            io.BytesIO(data),
            parse_options=pj.ParseOptions(
                explicit_schema=OP_ARROW_SCHEMA, unexpected_field_behavior="ignore"
            ),
            read_options=pj.ReadOptions(block_size=1 << 24),
        ).select(OP_ARROW_SCHEMA.names)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    rows: list[dict[str, Any]] = []
    for line in data.splitlines():
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or "process" not in obj or "op_id" not in obj:
                raise ValueError("not an op line")
            rows.append(obj)
        except ValueError:
            stats.lines_skipped += 1
    try:
        return pa.Table.from_pylist(rows, schema=OP_ARROW_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        good = []
        for r in rows:
            try:
                pa.Table.from_pylist([r], schema=OP_ARROW_SCHEMA)
                good.append(r)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                stats.lines_skipped += 1
        return pa.Table.from_pylist(good, schema=OP_ARROW_SCHEMA)


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


def write_history_parquet(table: pa.Table, path: str | os.PathLike[str]) -> None:
    table = table.cast(HISTORY_ARROW_SCHEMA)
    tmp = Path(str(path) + ".tmp")
    pq.write_table(table, tmp, row_group_size=ROW_GROUP_SIZE, compression="snappy")
    tmp.replace(path)


def read_history_jsonl(paths: Iterable[Path], stats: CompactionStats | None = None) -> pa.Table:
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


def compact_metrics(run_dir: str | os.PathLike[str]) -> Path | None:
    """``metrics/*.jsonl`` -> ``metrics.parquet`` (canonical names, topic/partition lifted)."""
    root = Path(run_dir)
    files = sorted((root / METRICS_DIR).glob("*.jsonl"))
    if not files:
        return None
    cols: dict[str, list[Any]] = {f.name: [] for f in METRIC_ARROW_SCHEMA}
    names: dict[str, str] = {}
    for path in files:
        for line in path.read_bytes().splitlines():
            try:
                s = json.loads(line)
                raw = str(s["name"])
                labels = s.get("labels") or {}
                part = labels.get("partition")
                row = (
                    int(s["time_ns"]),
                    str(s.get("node") or path.stem),
                    names.setdefault(raw, canonical_metric_name(raw)),
                    labels.get("topic"),
                    int(part) if part is not None else None,
                    json.dumps(labels, separators=(",", ":"), sort_keys=True) if labels else None,
                    float(s["value"]),
                )
            except (ValueError, KeyError, TypeError):
                continue
            for name, v in zip(cols, row, strict=True):
                cols[name].append(v)
    table = pa.table(cols, schema=METRIC_ARROW_SCHEMA)
    out = root / METRICS_PARQUET
    tmp = Path(str(out) + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(out)
    return out


def _fault_row(obj: dict[str, Any]) -> dict[str, Any]:
    """One line of ``faults.jsonl`` (written by ``harness/faults/fault_log.py``: times in
    float seconds, ``target`` and ``params`` objects) as a row of the fault table.
    Lines already in the table's own shape (``start_ns``...) are taken as they are."""
    if "start_ns" in obj:
        return {
            "start_ns": int(obj["start_ns"]),
            "end_ns": None if obj.get("end_ns") is None else int(obj["end_ns"]),
            "target": obj.get("target"),
            "kind": obj.get("kind"),
            "detail": obj.get("detail"),
        }
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
        "start_ns": int(float(obj["start"]) * 1e9),
        "end_ns": None if end is None else int(float(end) * 1e9),
        "target": summary,
        "kind": obj.get("kind"),
        "detail": json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str),
    }


def read_faults(run_dir: str | os.PathLike[str]) -> pa.Table:
    path = Path(run_dir) / FAULTS_JSONL
    rows = []
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                rows.append(_fault_row(json.loads(line)))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return pa.Table.from_pylist(rows, schema=FAULT_ARROW_SCHEMA)


def compact_to_parquet(run_dir: str | os.PathLike[str]) -> CompactionStats:
    """Compact ``history/*.jsonl`` into ``history.parquet`` and ``metrics/*.jsonl`` into
    ``metrics.parquet``.  Idempotent: re-running rewrites both from the JSON Lines."""
    root = Path(run_dir)
    stats = CompactionStats()
    table = read_history_jsonl(sorted((root / HISTORY_DIR).glob("*.jsonl")), stats)
    write_history_parquet(table, root / HISTORY_PARQUET)
    compact_metrics(root)
    return stats
