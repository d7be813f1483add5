"""``verdict.json`` as the commands that read it back see it: its status, the checkers that
found anomalies, and the nemesis section in words (nightly rows, reproduction outcomes,
shrinking). The analysis writes it (analysis/verdict.py); this is the reading side, so the
layers above the analysis's peer, the harness, need not import the analysis to read one.
Cheap to import (the command line reads it): nothing here imports pyarrow."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: the verdict and the report, in the run directory (run_dir.py lists the whole layout)
VERDICT_JSON = "verdict.json"
REPORT_HTML = "report.html"

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"


def read_verdict(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run directory's verdict.json, or None when it has none or it is unreadable."""
    try:
        value = json.loads((Path(run_dir) / VERDICT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def anomalies_by_checker(verdict: dict[str, Any]) -> dict[str, int]:
    """Anomalies per checker that found some, from a verdict.json (at least 1 per invalid
    checker, whatever its count says)."""
    out: dict[str, int] = {}
    for name, checker in (verdict.get("checkers") or {}).items():
        if not isinstance(checker, dict) or checker.get("status") != INVALID:
            continue
        count = checker.get("anomaly_count")
        out[str(name)] = int(count) if isinstance(count, int) and count > 0 else 1
    return out


def nemesis_line(section: dict[str, Any]) -> str:
    """The verdict's ``nemesis`` section in one line (the verdict's summary, the report, a
    nightly row)."""
    parts = [f"{section['scheduled']} fault(s) scheduled, {section['applied']} applied"]
    for key, words in (
        ("failed", "failed"),
        ("not_reached", "never reached"),
        ("unhealed", "left unhealed"),
        ("heals_retried", "heal(s) retried"),
    ):
        if section.get(key):
            parts.append(f"{section[key]} {words}")
    n = len(section.get("errors") or [])
    parts.append(f"{n} error{'s' if n != 1 else ''}" if n else "no errors")
    return ", ".join(parts)


def nemesis_error_line(error: dict[str, Any]) -> str:
    """One error of the ``nemesis`` section as a line."""
    at = error.get("at")
    when = f" (due at {float(at):.1f} s)" if isinstance(at, int | float) else ""
    return f"action {error['action']} {error.get('kind')}: {error['step']} failed{when}: " + str(
        error["error"]
    )
