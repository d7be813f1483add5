"""The verdict's ``findings``, shared by both engines: what the run found besides the checkers'
anomalies, each with the faults active at that moment and in the half minute before (from the
nemesis log) and the command that repeats the run.  Three kinds:

* ``client_crash``: a workload client process that died from a signal or a library assertion
  (``client-crashes/*.json``, written by the workload as it happened).  A bug in a client
  library, not in the cluster.
* ``client_hang``: a blocking call of a workload client's library that never returned, long
  past its own timeout (``client-hangs/*.json``: the harness stopped waiting, recorded the op
  ``info`` and went on with a new client; librdkafka#5456).  A bug in a client library, not
  in the cluster.
* ``node_error``: an exception that escaped the code of one of the cluster's nodes (our
  nodes' tracebacks; Apache Kafka's Java programming errors such as IllegalStateException;
  rundir/node_errors.py reads them from the nodes' logs), one per type and place in the
  code.  A bug in the cluster that clients may never see.

Each leaves the checkers' verdict alone and makes the run's exit code 1 (verdict.py). In
words: rundir/verdict_file.py (``finding_line``), which the nightly rows read too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..rundir.client_crashes import read_crashes
from ..rundir.client_hangs import read_hangs
from ..rundir.node_errors import MAX_DISTINCT, NodeError, read_node_errors
from ..rundir.outcome_log import read_outcomes
from ..rundir.verdict_file import (
    BEFORE_S,
    CLIENT_CRASH,
    CLIENT_HANG,
    NODE_ERROR,
    finding_line,
    judged_cluster,
)

__all__ = [
    "BEFORE_S",
    "CLIENT_CRASH",
    "CLIENT_HANG",
    "NODE_ERROR",
    "client_crash_finding",
    "client_hang_finding",
    "finding_line",
    "node_error_finding",
    "read_findings",
]

SCENARIO_FILE = "scenario.yaml"


def _target(action: dict[str, Any]) -> str | None:
    rule = action.get("rule") or {}
    if rule.get("link"):
        link = rule["link"]
        return ", ".join(link) if isinstance(link, list) else str(link)
    if action.get("node") is not None:
        return f"node {action['node']}"
    return action.get("client")


def _spans(
    schedule: list[dict[str, Any]], lines: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Each applied action: its kind, target and when it was applied and healed (epoch s)."""
    spans: dict[int, dict[str, Any]] = {}
    for line in lines or []:
        i = line["action"]
        if line["step"] == "apply" and not line.get("error"):
            action = schedule[i] if 0 <= i < len(schedule) else {}
            instant = not action.get("duration")  # a crash, a restart: no heal step
            spans[i] = {
                "action": i,
                "kind": line.get("kind"),
                "target": _target(action),
                "applied": float(line["end"]),
                "healed": float(line["end"]) if instant else None,
            }
        elif line["step"] in ("heal", "heal_retry") and not line.get("error") and i in spans:
            spans[i]["healed"] = float(line["end"])
    return sorted(spans.values(), key=lambda s: (s["applied"], s["action"]))


def _shown(span: dict[str, Any], origin_s: float | None) -> dict[str, Any]:
    def rel(t: float | None) -> float | None:
        return None if t is None or origin_s is None else round(t - origin_s, 3)

    return {
        "action": span["action"],
        "kind": span["kind"],
        "target": span["target"],
        "applied_at_s": rel(span["applied"]),
        "healed_at_s": rel(span["healed"]),
    }


def _around(
    spans: list[dict[str, Any]], t: float | None, origin_s: float | None
) -> dict[str, list[dict[str, Any]]]:
    """The faults active at ``t`` and those healed in the ``BEFORE_S`` before it."""
    if t is None:
        return {"faults_active": [], "faults_before": []}
    active = [s for s in spans if s["applied"] <= t and (s["healed"] is None or s["healed"] >= t)]
    before = [s for s in spans if s["healed"] is not None and t - BEFORE_S <= s["healed"] < t]
    return {
        "faults_active": [_shown(s, origin_s) for s in active],
        "faults_before": [_shown(s, origin_s) for s in before],
    }


def client_crash_finding(
    record: dict[str, Any],
    spans: list[dict[str, Any]],
    origin_ns: int | None,
    repeat: str | None,
) -> dict[str, Any]:
    """One crash record as a finding, with the faults around it."""
    t = (record.get("time_ns") or 0) / 1e9
    origin_s = origin_ns / 1e9 if origin_ns else None
    return {
        "kind": CLIENT_CRASH,
        "process": record["process"],
        "user_kind": record.get("kind"),
        "time_ns": record.get("time_ns"),
        "at_s": round(t - origin_s, 3) if origin_s is not None and t else None,
        "library": record.get("library"),
        "library_version": record.get("library_version"),
        "binding_version": record.get("binding_version"),
        "signal": record.get("signal"),
        "exit_code": record.get("exit_code"),
        "message": record.get("message"),
        "in_flight": record.get("in_flight") or [],
        **_around(spans, t, origin_s),
        "restarted_as": record.get("restarted_as"),
        "log": record.get("log"),
        "log_tail": record.get("log_tail") or [],
        "repeat": repeat,
    }


def client_hang_finding(
    record: dict[str, Any],
    spans: list[dict[str, Any]],
    origin_ns: int | None,
    repeat: str | None,
) -> dict[str, Any]:
    """One hang record as a finding, with the faults around the call (from its invocation:
    what made it hang was there when it started)."""
    t = (record.get("invoke_ns") or record.get("time_ns") or 0) / 1e9
    origin_s = origin_ns / 1e9 if origin_ns else None
    return {
        "kind": CLIENT_HANG,
        "process": record["process"],
        "user_kind": record.get("kind"),
        "time_ns": record.get("time_ns"),
        "invoke_ns": record.get("invoke_ns"),
        "at_s": round(t - origin_s, 3) if origin_s is not None and t else None,
        "call": record.get("call"),
        "timeout_s": record.get("timeout_s"),
        "waited_s": record.get("waited_s"),
        "type": record.get("type"),
        "op_id": record.get("op_id"),
        "txn": record.get("txn"),
        "transactional_id": record.get("transactional_id"),
        "library": record.get("library"),
        "library_version": record.get("library_version"),
        "binding_version": record.get("binding_version"),
        "issue": record.get("issue"),
        "message": record.get("message"),
        **_around(spans, t, origin_s),
        "repeat": repeat,
    }


def node_error_finding(
    error: NodeError,
    spans: list[dict[str, Any]],
    origin_ns: int | None,
    repeat: str | None,
) -> dict[str, Any]:
    """One kind of node error as a finding, with the faults around its first occurrence."""
    origin_s = origin_ns / 1e9 if origin_ns else None
    t = error.time_s
    at = round(t - origin_s, 3) if t is not None and origin_s is not None else None
    return {
        "kind": NODE_ERROR,
        **error.to_json(),
        "at_s": at,
        **_around(spans, t, origin_s),
        "repeat": repeat,
    }


def read_findings(
    run_dir: str | os.PathLike[str], schedule: list[dict[str, Any]], info: dict[str, Any]
) -> tuple[list[dict[str, Any]], str | None]:
    """The run's findings (client crashes first, then client hangs), and a note naming what
    could not be read."""
    crashes, note = read_crashes(run_dir)
    hangs, hangs_note = read_hangs(run_dir)
    errors, logs_note = read_node_errors(run_dir, judged_cluster(info)["flavour"])
    note = "; ".join(filter(None, (note, hangs_note, logs_note))) or None
    if not crashes and not hangs and not errors:
        return [], note
    lines, _ = read_outcomes(run_dir)
    spans = _spans(schedule, lines)
    origin = info.get("workload_started_ns") or info.get("started_ns")
    scenario = Path(run_dir) / SCENARIO_FILE
    repeat = f"txnchaos run {scenario}" if scenario.is_file() else None
    findings = [client_crash_finding(r, spans, origin, repeat) for r in crashes]
    findings += [client_hang_finding(r, spans, origin, repeat) for r in hangs]
    findings += [node_error_finding(e, spans, origin, repeat) for e in errors[:MAX_DISTINCT]]
    if len(errors) > MAX_DISTINCT:
        more = f"{len(errors) - MAX_DISTINCT} more kinds of node error not listed"
        note = "; ".join(filter(None, (note, more)))
    return findings, note
