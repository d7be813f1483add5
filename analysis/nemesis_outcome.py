"""The verdict's ``nemesis`` section, shared by both engines: how many scheduled faults were
applied, failed or never reached, which heals failed, and every error, from the nemesis log
(``nemesis.jsonl``) — a chaos run must say when the chaos it was asked for did not happen.
In words: rundir/verdict_file.py (``nemesis_line``), which the nightly rows read too."""

from __future__ import annotations

import os
from typing import Any

from ..rundir.outcome_log import read_outcomes


def nemesis_section(
    schedule: list[dict[str, Any]], lines: list[dict[str, Any]] | None
) -> dict[str, Any] | None:
    """Counts over the scheduled actions and the errors in log order; None without a nemesis
    log (a run recorded before it existed)."""
    if lines is None:
        return None
    applied: set[int] = set()
    failed: set[int] = set()
    last_heal: dict[int, bool] = {}  # action -> whether its last heal step succeeded
    retried = 0
    errors = []
    for line in lines:
        action, step, error = line["action"], line["step"], line.get("error")
        if step == "apply":
            (failed if error else applied).add(action)
        else:
            last_heal[action] = not error
            retried += step == "heal_retry"
        if error:
            errors.append(
                {
                    "action": action,
                    "kind": line.get("kind"),
                    "step": step,
                    "at": line.get("at"),
                    "error": str(error),
                }
            )
    return {
        "scheduled": len(schedule),
        "applied": len(applied),
        "failed": len(failed - applied),
        "not_reached": len(set(range(len(schedule))) - applied - failed),
        "heals_retried": retried,
        "unhealed": sum(1 for ok in last_heal.values() if not ok),
        "errors": errors,
    }


def read_nemesis_section(
    run_dir: str | os.PathLike[str], schedule: list[dict[str, Any]]
) -> tuple[dict[str, Any] | None, str | None]:
    """The run directory's ``nemesis`` section, and a note when log lines were unreadable."""
    lines, note = read_outcomes(run_dir)
    return nemesis_section(schedule, lines), note
