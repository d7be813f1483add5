"""The schema of ``dual_write_db.json``: what the dual writers' databases held at the end of a
run (captured after the final read), which the ``dual_write`` checker compares with the final
read_committed read. Absent from runs without dual writers.

``{"captured_ns": int, "databases": [{"kind": "sqlite"|"postgresql", "where": str,
"rows": [{"value", "writer", "txn", "topic", "partition"}], "states": [{"transactional_id",
"prepared_state", "writer", "txn"}]}]}``: one row per Kafka record a committed database
transaction mirrors; ``states`` is the seed's transactional id -> prepared state mapping.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypedDict, cast

from .errors import RunDirError
from .final_state import check_types

DUAL_WRITE_DB_JSON = "dual_write_db.json"


class DbRowJson(TypedDict):
    value: str
    writer: str
    txn: int
    topic: str
    partition: int


class DbStateJson(TypedDict):
    transactional_id: str
    prepared_state: str
    writer: str
    txn: int


class DatabaseContents(TypedDict):
    kind: str
    where: str
    rows: list[DbRowJson]
    states: list[DbStateJson]


class DualWriteDb(TypedDict):
    captured_ns: int
    databases: list[DatabaseContents]


_ROW_TYPES: dict[str, type] = {
    "value": str,
    "writer": str,
    "txn": int,
    "topic": str,
    "partition": int,
}
_STATE_TYPES: dict[str, type] = {
    "transactional_id": str,
    "prepared_state": str,
    "writer": str,
    "txn": int,
}
_DB_TYPES: dict[str, type] = {"kind": str, "where": str}


def _required(obj: Any, types: dict[str, type], where: str) -> None:
    if not isinstance(obj, dict):
        raise RunDirError(f"{where} must be a JSON object")
    missing = [k for k in types if obj.get(k) is None]
    if missing:
        raise RunDirError(f"{where} lacks {', '.join(missing)}")
    check_types(obj, types, where)


def parse_dual_write_db(data: Any, path: Path) -> DualWriteDb:
    """``data`` (parsed JSON) as a :class:`DualWriteDb`, or a RunDirError naming the field."""
    _required(data, {"captured_ns": int}, f"database contents ({path})")
    dbs = data.get("databases")
    if not isinstance(dbs, list):
        raise RunDirError(f"database contents ({path}) has no 'databases' list")
    for i, db in enumerate(dbs):
        where = f"database contents ({path}): databases[{i}]"
        _required(db, _DB_TYPES, where)
        for key, types in (("rows", _ROW_TYPES), ("states", _STATE_TYPES)):
            entries = db.get(key)
            if not isinstance(entries, list):
                raise RunDirError(f"{where} has no {key!r} list")
            for j, entry in enumerate(entries):
                _required(entry, types, f"{where}.{key}[{j}]")
    return cast(DualWriteDb, data)


def read_dual_write_db(run_dir: str | os.PathLike[str]) -> DualWriteDb | None:
    """The run's database contents; None when it has none (no dual writers)."""
    path = Path(run_dir) / DUAL_WRITE_DB_JSON
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirError(f"database contents ({path}) is not readable JSON: {exc}") from exc
    return parse_dual_write_db(data, path)


def write_dual_write_db(run_dir: str | os.PathLike[str], contents: DualWriteDb) -> Path:
    """Write atomically (temp file + rename)."""
    path = Path(run_dir) / DUAL_WRITE_DB_JSON
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(contents, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
