"""Helpers for the workload tests: read a run directory's history back."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txnchaos.rundir.compact import compact_to_parquet
from txnchaos.rundir.schema import OP_ARROW_SCHEMA


def jsonl_lines(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of every history file; each must parse against the schema."""
    out = []
    for f in sorted((run_dir / "history").glob("*.jsonl")):
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        pa.Table.from_pylist(rows, schema=OP_ARROW_SCHEMA)  # raises if a line breaks the schema
        out.extend(rows)
    return out


def compacted(run_dir: Path) -> list[dict[str, Any]]:
    stats = compact_to_parquet(run_dir)
    assert stats.lines_skipped == 0, stats
    return pq.read_table(run_dir / "history.parquet").to_pylist()


def summary(rows: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    return Counter((r["process"].rsplit("-", 1)[0], r["type"], r["outcome"]) for r in rows)


def ops_so_far(run_dir: Path) -> list[dict[str, Any]]:
    """The history lines a live run has written so far (a line still being written, with no
    newline yet, is left for the next look)."""
    out = []
    for f in sorted((run_dir / "history").glob("*.jsonl")):
        text = f.read_text()
        out.extend(json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines())
    return out


def happened(run_dir: Path, type_: str, prefix: str = "", outcome: str = "ok") -> bool:
    """Whether a live run has recorded an operation of ``type_`` with ``outcome`` by a process
    whose name starts with ``prefix``."""
    return any(
        r["type"] == type_ and r.get("outcome") == outcome and r["process"].startswith(prefix)
        for r in ops_so_far(run_dir)
    )
