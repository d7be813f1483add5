"""Run directory -> Spark DataFrames, with explicit schemas, read where the executors reach
the run's Parquet files (input_uri.py); validated first (``prepare_run``, load.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from ...rundir.compact import read_faults
from ...rundir.final_state import FinalState
from ...rundir.run_dir import RunDir, RunDirError
from ...rundir.schema import history_spark_schema, metrics_spark_schema
from ..input_uri import executor_path
from ..load import prepare_run
from .local_jvm import is_local


@dataclass
class RunData:
    run: RunDir
    history: DataFrame
    metrics: DataFrame | None
    faults: list[dict[str, Any]]
    final_state: FinalState | None


def load_run(
    spark: SparkSession, run: RunDir | str | os.PathLike[str], input_uri: str | None = None
) -> RunData:
    """DataFrames over a run directory (validated first unless ``run`` already is), whose
    Parquet files the executors read where input_uri.executor_path says: from ``input_uri``, a
    copy of the run directory, if given (checked to hold as many history rows)."""
    if not isinstance(run, RunDir):
        run = prepare_run(run)
    assert run.history_parquet is not None
    local = is_local(str(spark.sparkContext.master))

    def where(file: Path) -> str:
        return executor_path(Path(run.path), file, local=local, input_uri=input_uri)

    try:
        history = spark.read.schema(history_spark_schema()).parquet(where(run.history_parquet))
        if input_uri is not None:
            _check_copy(history, run.history_parquet, where(run.history_parquet))
    except RunDirError:
        raise
    except Exception as e:  # Spark could not list or read the copy: name the URI
        if input_uri is None:
            raise
        why = " ".join(str(e).split())[:300]
        uri = where(run.history_parquet)
        raise RunDirError(f"--input-uri: {uri} could not be read: {why}") from e
    metrics = None
    if run.metrics_parquet is not None and run.info.get("metrics_supported", True):
        metrics = spark.read.schema(metrics_spark_schema()).parquet(where(run.metrics_parquet))
    faults = read_faults(run.path).to_pylist()
    return RunData(run, history, metrics, faults, run.final_state)


def _check_copy(history: DataFrame, local_file: Path, uri: str) -> None:
    """Refuse a copy at ``uri`` whose row count differs from the run directory's history (a
    stale or partial upload would be judged as if it were the run)."""
    want = pq.ParquetFile(local_file).metadata.num_rows
    got = history.count()
    if got != want:
        raise RunDirError(
            f"--input-uri: {uri} holds {got} history rows, the run directory {want}: "
            "copy the run directory there again"
        )
