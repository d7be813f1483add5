"""A run's per-client JSON records (client crashes, client hangs): one file each, written
whole, read back by time with unreadable files named rather than fatal."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Record = dict[str, Any]


def write_record(path: Path, record: Record) -> Path:
    """Write one record whole (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_records(
    root: Path, what: str, order: Callable[[Record], Any]
) -> tuple[list[Record], str | None]:
    """Every record under ``root`` (each a JSON object naming its ``process``), sorted by
    ``order``, and a note naming the unreadable files (skipped), ``what`` saying of what."""
    if not root.is_dir():
        return [], None
    out, bad = [], []
    for path in sorted(root.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            bad.append(path.name)
            continue
        if isinstance(record, dict) and isinstance(record.get("process"), str):
            out.append(record)
        else:
            bad.append(path.name)
    out.sort(key=order)
    note = f"{root}: unreadable {what} record(s) skipped: {', '.join(bad)}" if bad else None
    return out, note
