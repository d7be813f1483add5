"""History capture: the shared history schema, the per-process writer, compaction, run-dir layout.

The harness records with :class:`HistoryWriter`, compacts with :func:`compact_to_parquet`; the
analysis reads what :mod:`.schema` and :mod:`.run_dir` define.
"""

from .compact import CompactionStats, compact_metrics, compact_to_parquet, read_faults
from .run_dir import RunDir, RunDirError, open_run_dir
from .schema import (
    HISTORY_ARROW_SCHEMA,
    OP_ARROW_SCHEMA,
    SCHEMA_VERSION,
    EventType,
    Isolation,
    MetricName,
    Outcome,
    decode_value,
    encode_value,
    history_spark_schema,
)
from .writer import HistoryWriter, Op

__all__ = [
    "HISTORY_ARROW_SCHEMA",
    "OP_ARROW_SCHEMA",
    "SCHEMA_VERSION",
    "CompactionStats",
    "EventType",
    "HistoryWriter",
    "Isolation",
    "MetricName",
    "Op",
    "Outcome",
    "RunDir",
    "RunDirError",
    "compact_metrics",
    "compact_to_parquet",
    "decode_value",
    "encode_value",
    "history_spark_schema",
    "open_run_dir",
    "read_faults",
]
