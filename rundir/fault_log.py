"""The fault log: one JSON object per line for every fault the nemesis applied.

File: ``faults.jsonl`` in the run directory (:data:`FAULT_LOG_NAME`). Each line is
appended and flushed as soon as the fault is over (its end is known), so a crashed
run keeps every finished fault. Schema of one line::

    {
      "kind":   str,            # delay | drop_request | drop_response | reorder | duplicate
                                # | blackhole | reset | throttle | (process/client faults later)
      "start":  float,          # seconds since the epoch when the fault began to apply
      "end":    float,          # seconds since the epoch when it stopped (== start if instant)
      "link":   str | null,     # proxied link name (e.g. "client->n1", "n1->n2"), null if none
      "target": {               # what was hit; keys absent when unknown / not applicable
        "api": str,             # API name, e.g. "Produce" (frame faults only)
        "api_key": int,
        "api_version": int,
        "correlation_id": int,  # the client's correlation id of the frame
        "transactional_ids": [str],
        "producer_ids": [int],
        "direction": "request" | "response",
        ...                     # other fault families may add keys
      },
      "params": {               # the rule's parameters plus what was drawn for this instance
        "rule": str,            # id of the rule that caused it
        ...                     # e.g. {"ms": 200, "applied_ms": 213.4} for a delay
      }
    }

Frame faults (delay, drop_*, reorder, duplicate) produce one line per affected
frame; link faults (blackhole, reset, throttle) one line per (rule, link) span of
activity.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

FAULT_LOG_NAME = "faults.jsonl"
#: the kinds logged one line per frame they touched (the proxy's frame rules); every other
#: kind is one line per fault (a link shaped, a node killed, a client crashed). The proxy's
#: rule registry derives the same set (tests/harness/faults/proxy/test_rule_kinds.py).
FRAME_KINDS = frozenset(
    {
        "delay",
        "drop_request",
        "drop_response",
        "reorder",
        "duplicate",
        "strip_partition",
        "stale_marker",
    }
)


class FaultLog:
    """Append-only JSON Lines writer for applied faults (thread-safe, flushed per line)."""

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        path = Path(path)
        if path.is_dir():
            path = path / FAULT_LOG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fsync = fsync
        self._lock = threading.Lock()
        self._fh: TextIO | None = path.open("a", encoding="utf-8")
        self.count = 0

    def write(
        self,
        kind: str,
        start: float,
        end: float | None = None,
        *,
        link: str | None = None,
        target: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        record = {
            "kind": kind,
            "start": float(start),
            "end": float(start if end is None else end),
            "link": link,
            "target": dict(target or {}),
            "params": dict(params or {}),
        }
        line = json.dumps(record, separators=(",", ":"), default=str)
        with self._lock:
            if self._fh is None:
                raise ValueError(f"fault log {self.path} is closed")
            self._fh.write(line + "\n")
            self._fh.flush()
            if self._fsync:
                os.fsync(self._fh.fileno())
            self.count += 1
        return record

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> FaultLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_fault_log(path: str | Path) -> list[dict[str, Any]]:
    """Read every record of a fault log (a file or a run directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / FAULT_LOG_NAME
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def now() -> float:
    return time.time()
