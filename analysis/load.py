"""A run directory, validated for judging, with errors that say what is wrong.

``prepare_run`` validates without Spark (so a bad directory fails fast, before a JVM starts),
and never writes: the analysis reads the run directory strictly; compacting a run left as JSON
Lines is the writer side's (rundir/compact.py: the harness, or ``txnchaos analyze`` first).
Each engine then reads it: the Spark engine with explicit schemas (spark/load.py), the
reference engine with pyarrow.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq

from ..rundir.compact import (
    parquet_notes,
    read_faults,
)
from ..rundir.run_dir import RunDir, RunDirError, open_run_dir
from ..rundir.schema import (
    HISTORY_ARROW_SCHEMA,
    METRIC_ARROW_SCHEMA,
)

#: how Spark reports a file it could not read (a corrupt Parquet page, a truncated file)
_READ_FAILURE = re.compile(r"FAILED_READ_FILE[^\]]*\]\s*Encountered error while reading file (\S+)")
_CAUSE = re.compile(r"Caused by: (?:[\w.$]+\.)?(\w+(?:Exception|Error)): (.*?)(?:\s+at\s|$)", re.S)


def unreadable_file(exc: BaseException) -> str | None:
    """One line naming the file a Spark job failed to read and why, or None when ``exc`` is
    not such a failure (Parquet whose footer is sound but whose pages are not only fails
    once Spark reads it)."""
    text = str(exc)
    found = _READ_FAILURE.search(text)
    if found is None:
        return None
    path = found.group(1).rstrip(".").removeprefix("file://")
    cause = _CAUSE.search(text)
    why = f": {cause.group(1)}: {' '.join(cause.group(2).split())[:200]}" if cause else ""
    return f"{path} is not readable Parquet{why}"


def _check_parquet(path: os.PathLike[str], expected: pa.Schema, what: str) -> None:
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise RunDirError(f"{what} ({path}) is not a readable Parquet file: {e}") from e
    missing = [f.name for f in expected if f.name not in schema.names]
    if missing:
        raise RunDirError(f"{what} ({path}) lacks columns: {', '.join(missing)}")
    for f in expected:
        got = schema.field(f.name).type
        if got != f.type:
            raise RunDirError(f"{what} ({path}): column {f.name} is {got}, expected {f.type}")


def prepare_run(path: str | os.PathLike[str]) -> RunDir:
    """Validate a run directory without Spark, reading it only: required files present and
    compacted (history.parquet, and metrics.parquet when the nodes' metrics were scraped:
    the harness compacts every run it records, ``txnchaos analyze`` one it did not), Parquet
    schemas as expected, the fault log readable.  Raises :class:`RunDirError` (a bad line:
    :class:`CorruptLineError`, naming the file and line). The returned run's ``notes`` say
    what the compaction skipped: torn lines."""
    run = open_run_dir(path)
    if run.history_parquet is None:
        raise RunDirError(f"{run.path} has no history.parquet: the run was not compacted")
    if run.metrics_parquet is None and run.metrics_jsonl:
        raise RunDirError(f"{run.path} has no metrics.parquet: the metrics were not compacted")
    _check_parquet(run.history_parquet, HISTORY_ARROW_SCHEMA, "history")
    notes = parquet_notes(run.history_parquet)
    if run.metrics_parquet is not None and run.info.get("metrics_supported", True):
        _check_parquet(run.metrics_parquet, METRIC_ARROW_SCHEMA, "metrics")
        notes += parquet_notes(run.metrics_parquet)
    read_faults(run.path, notes)  # read again by load_run: a small file, checked before Spark
    return replace(run, notes=tuple(notes))
