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
