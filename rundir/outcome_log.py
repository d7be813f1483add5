"""The nemesis log: how each scheduled action was carried out, so a run can say when the chaos
it was asked for did not happen.

File: ``nemesis.jsonl`` in the run directory, one line per step of an action, appended as the
step ends::

    {
      "action": int,        # index in schedule.json
      "kind":   str,        # the action's fault kind
      "step":   "apply" | "heal" | "heal_retry",   # heal_retry: the final heal, after a heal failed
      "at":     float,      # when the step was due, seconds after the workload started (a late
                            # fault's heal is due its full duration after it was applied)
      "start":  float,      # seconds since the epoch: the step began ...
      "end":    float,      # ... and ended (a client crash's apply: once the client was killed)
      "error":  str | null  # why the step failed; null when it succeeded
    }

An action with no ``apply`` line was never reached (the run stopped first).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

NEMESIS_LOG = "nemesis.jsonl"
STEPS = ("apply", "heal", "heal_retry")


class OutcomeLog:
    """Appends step lines to ``nemesis.jsonl`` (thread-safe; the file is opened per line: a
    run writes a few per action)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / NEMESIS_LOG
        self._lock = threading.Lock()

    def write(
        self,
        action: int,
        kind: str,
        step: str,
        at: float,
        start: float,
        end: float,
        error: str | None = None,
    ) -> dict[str, Any]:
        line = {
            "action": action,
            "kind": kind,
            "step": step,
            "at": round(at, 3),
            "start": start,
            "end": end,
            "error": error,
        }
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
        return line


def read_outcomes(
    run_dir: str | os.PathLike[str],
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The nemesis log's lines (None when the run has none: recorded before it existed), and
    a note when lines were unreadable (skipped)."""
    path = Path(run_dir) / NEMESIS_LOG
    if not path.exists():
        return None, None
    lines: list[dict[str, Any]] = []
    bad = 0
    for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            bad += 1
            continue
        if isinstance(line, dict) and isinstance(line.get("action"), int) and line.get("step"):
            lines.append(line)
        else:
            bad += 1
    note = f"{path}: {bad} unreadable line(s) skipped" if bad else None
    return lines, note
