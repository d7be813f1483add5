"""The run directory: what a run leaves behind, and its validation.

Layout (``*`` = required for analysis; everything else is optional and the checkers that need
it say ``unknown`` when it is absent)::

    RUN_DIR/
      run.json*             {"schema_version": 1, "scenario": str, "seed": int,
                             "started_ns": int, "ended_ns": int | null,
                             "workload_started_ns": int,  # what schedule.json's `at` counts from
                             "cluster_kind": "local" | "docker" | "external",
                             "transaction_timeout_ms": int,      # producers' transaction.timeout.ms
                             "transaction_max_timeout_ms": int,  # broker transaction.max.timeout.ms
                             "metrics_supported": bool,          # does the cluster expose /metrics
                             "complete": bool}                   # false/absent: crashed or Ctrl-C
      schedule.json         the nemesis schedule: [{"at" (s after the workload started), "kind",
                             "duration", "node", "rule", "client", "origin"}]; a proxy rule made
                            from action i has the id "action-<i>" (so its fault-log lines name it)
      history/<process>.jsonl*   append-only JSON Lines, one file per process (schema.py)
      history.parquet*      the compacted, flat history (``compact_to_parquet``); either this or
                            history/*.jsonl must exist: analysis compacts on demand
      faults.jsonl          one line per applied fault, written by rundir/fault_log.py:
                            {"kind", "start", "end" (float s), "link", "target": {..},
                             "params": {..}}; read as rows {start_ns, end_ns, target, kind,
                             detail} (compact.read_faults)
      nemesis.jsonl         one line per step of a scheduled action (apply, heal, heal_retry): when
                            it was due and ran, and its error (rundir/outcome_log.py)
      metrics/<node>.jsonl  scraped samples, one line each:
                            {"time_ns", "node", "name", "labels": {str: str}, "value": float}
      metrics.parquet       compacted metrics (flat: topic and partition lifted from labels)
      final_state.json      snapshot after heal + quiescence (typed in final_state.py):
                            {"captured_ns": int,
                             "partitions": [{"topic", "partition", "lso", "high_watermark",
                                             "log_start_offset", "leader"?, "replicas"?: [..]}],
                             "open_transactions": [{"topic", "partition", "producer_id",
                                             "producer_epoch", "first_offset",
                                             "start_ns"?, "last_ns"?}],
                             "coordinator_transactions": [{"transactional_id", "producer_id",
                                             "producer_epoch", "state", "timeout_ms",
                                             "start_ns"?, "partitions": [{"topic","partition"}]}]
                                             | null  (null: the cluster exposes no coordinator
                                                      state)}
      dual_write_db.json    runs with dual writers only: their databases after the final read
                            (typed in dual_write_db.py): {"captured_ns", "databases": [{"kind",
                             "where", "rows": [..], "states": [..]}]}

The final read_committed read of every partition is part of the history (``final_read`` events
of a process conventionally named ``final-reader``), so it is compacted with everything else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import RunDirError
from .final_state import FinalState, check_types, parse_final_state
from .schema import SCHEMA_VERSION

RUN_JSON = "run.json"
HISTORY_DIR = "history"
HISTORY_PARQUET = "history.parquet"
FAULTS_JSONL = "faults.jsonl"
METRICS_DIR = "metrics"
METRICS_PARQUET = "metrics.parquet"
FINAL_STATE_JSON = "final_state.json"

DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000  # librdkafka's transaction.timeout.ms default


@dataclass(frozen=True)
class RunDir:
    """A validated run directory."""

    path: Path
    info: dict[str, Any]
    history_parquet: Path | None
    history_jsonl: tuple[Path, ...]
    faults: Path | None
    metrics_parquet: Path | None
    metrics_jsonl: tuple[Path, ...]
    final_state: FinalState | None
    #: what reading it skipped (torn lines), as ``FILE:LINE: ...`` sentences for the verdict
    notes: tuple[str, ...] = ()

    @property
    def transaction_max_timeout_ms(self) -> int:
        return int(
            self.info.get("transaction_max_timeout_ms") or DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
        )

    @property
    def transaction_timeout_ms(self) -> int:
        return int(self.info.get("transaction_timeout_ms") or DEFAULT_TRANSACTION_TIMEOUT_MS)

    @property
    def metrics_supported(self) -> bool:
        return bool(self.info.get("metrics_supported", True)) and bool(
            self.metrics_parquet or self.metrics_jsonl
        )


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RunDirError(f"{what} ({path}) cannot be read: {e}") from e
    except UnicodeDecodeError as e:
        raise RunDirError(f"{what} ({path}) is not UTF-8 text (byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise RunDirError(f"{what} ({path}) is not valid JSON: {e}") from e


#: run.json fields the analysis reads, and their JSON types (each may be absent or null)
_INFO_TYPES: dict[str, type] = {
    "started_ns": int,
    "ended_ns": int,
    "transaction_timeout_ms": int,
    "transaction_max_timeout_ms": int,
    "metrics_supported": bool,
    "complete": bool,
}


def _validate_info(info: dict[str, Any], path: Path) -> None:
    check_types(info, _INFO_TYPES, str(path))


def open_run_dir(path: str | os.PathLike[str]) -> RunDir:
    """Validate ``path`` as a run directory; raise :class:`RunDirError` naming what is wrong."""
    root = Path(path)
    if not root.exists():
        raise RunDirError(f"run directory {root} does not exist")
    if not root.is_dir():
        raise RunDirError(f"{root} is not a directory")
    run_json = root / RUN_JSON
    if not run_json.is_file():
        raise RunDirError(f"{run_json} is missing (every run writes run.json when it starts)")
    info = _read_json(run_json, "run.json")
    if not isinstance(info, dict):
        raise RunDirError(f"{run_json} must hold a JSON object")
    _validate_info(info, run_json)
    version = info.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise RunDirError(
            f"{run_json}: history schema version {version} is not supported "
            f"(this analysis reads version {SCHEMA_VERSION})"
        )
    parquet = root / HISTORY_PARQUET
    jsonl = tuple(sorted((root / HISTORY_DIR).glob("*.jsonl")))
    if not parquet.exists() and not jsonl:
        raise RunDirError(
            f"no history in {root}: neither {HISTORY_PARQUET} nor {HISTORY_DIR}/*.jsonl exists"
        )
    faults = root / FAULTS_JSONL
    mparquet = root / METRICS_PARQUET
    mjsonl = tuple(sorted((root / METRICS_DIR).glob("*.jsonl")))
    fs_path = root / FINAL_STATE_JSON
    final_state = (
        parse_final_state(_read_json(fs_path, "final state"), fs_path) if fs_path.exists() else None
    )
    return RunDir(
        path=root,
        info=info,
        history_parquet=parquet if parquet.exists() else None,
        history_jsonl=jsonl,
        faults=faults if faults.exists() else None,
        metrics_parquet=mparquet if mparquet.exists() else None,
        metrics_jsonl=mjsonl,
        final_state=final_state,
    )


# -- helpers for writers (harness and synthetic histories) ----------------------------------


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` atomically (temp file + rename)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(p)


def write_run_info(run_dir: str | os.PathLike[str], **info: Any) -> None:
    info.setdefault("schema_version", SCHEMA_VERSION)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(run_dir) / RUN_JSON, info)


def append_jsonl(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
        fh.flush()


def append_fault(
    run_dir: str | os.PathLike[str],
    *,
    start_ns: int,
    end_ns: int | None,
    target: str,
    kind: str,
    detail: str = "",
) -> None:
    append_jsonl(
        Path(run_dir) / FAULTS_JSONL,
        [
            {
                "start_ns": start_ns,
                "end_ns": end_ns,
                "target": target,
                "kind": kind,
                "detail": detail,
            }
        ],
    )


def append_metric_samples(
    run_dir: str | os.PathLike[str], node: str, samples: Iterable[Mapping[str, Any]]
) -> None:
    """Append samples ``{"time_ns", "name", "labels", "value"}`` scraped from ``node``."""
    append_jsonl(
        Path(run_dir) / METRICS_DIR / f"{node}.jsonl", ({"node": node, **s} for s in samples)
    )
