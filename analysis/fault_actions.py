"""Faults as the nemesis actions that caused them: one :class:`FaultAction` per scheduled action
(``schedule.json``), with the fault-log records it produced grouped under it.

The fault log has one record per affected request (a delay rule delaying 300 requests writes
300 lines) and one per node or client fault; the report draws one band per action, not per
record.  A record belongs to an action when its rule id names it (``action-<index>``, set by the
nemesis executor) or, for runs recorded before that, when its kind and target fit the action and
it started inside the action's window.  Records no scheduled action explains (a run without a
schedule) are merged per kind and target while they keep coming (gaps under a second).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..rundir.fault_log import FRAME_KINDS

SEC = 1_000_000_000
#: a record may start this long before its action's window or after its end and still be its
#: own (clocks of the harness's threads; a delayed frame logged as it is released)
SLACK_NS = SEC
#: unscheduled records of one kind and target closer than this are one band
MERGE_GAP_NS = SEC
_ACTION_RULE = re.compile(r"action-(\d+)$")
#: parameters of a record that say how it was made, not what it did
_QUIET_PARAMS = {"rule", "launcher", "action"}


def action_rule_id(index: int) -> str:
    """The proxy rule id the nemesis executor gives scheduled action ``index``."""
    return f"action-{index}"


@dataclass
class FaultAction:
    """One band of the report: a scheduled action and what it did, or unscheduled faults."""

    number: int  #: 1-based, in time order: the label in the plots and the fault table
    kind: str
    target: str
    origin: str  #: "action" or "random" (scheduled), "unscheduled" (found in the log only)
    scheduled: tuple[int, int] | None  #: ns window from the schedule
    applied: tuple[int, int] | None  #: ns: first record's start .. last record's end
    records: int  #: fault-log records grouped under it
    params: str  #: what the schedule asked for, as text
    effect: str  #: what the records say was done, as text
    index: int | None = None  #: position in schedule.json

    @property
    def window(self) -> tuple[int, int]:
        """What a band spans: the applied window, else the scheduled one."""
        w = self.applied or self.scheduled
        assert w is not None
        return w


def _detail(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(target, params) objects of a fault-table row's ``detail`` (empty when free-form)."""
    try:
        d = json.loads(record.get("detail") or "")
    except ValueError:
        return {}, {}
    if not isinstance(d, dict):
        return {}, {}
    target, params = d.get("target"), d.get("params")
    return (
        target if isinstance(target, dict) else {},
        params if isinstance(params, dict) else {},
    )


def _links(action: dict[str, Any]) -> list[str]:
    link = (action.get("rule") or {}).get("link", "*")
    return [link] if isinstance(link, str) else [str(x) for x in link]


def schedule_target(action: dict[str, Any]) -> str:
    if action.get("node") is not None:
        return f"node {action['node']}"
    if action.get("client") is not None or action["kind"].startswith("crash_"):
        return f"client {action.get('client') or 'any'}"
    links = _links(action)
    return "every link" if links == ["*"] else ", ".join(links)


def schedule_params(action: dict[str, Any]) -> str:
    parts = [f"for {float(action.get('duration') or 0):.4g} s"]
    for key, value in sorted((action.get("rule") or {}).items()):
        if key in ("link", "id"):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        parts.append(f"{key} {shown}")
    return "; ".join(parts)


def _effect(records: list[dict[str, Any]], unit: str, scheduled: bool) -> str:
    """What the records did, as text: how many, of which kinds, and each parameter that
    varied (its range or values).  Parameters the same in every record are the rule's own
    (shown from the schedule), except what was applied (``applied_*``), a single record's, or
    an unscheduled fault's."""
    if not records:
        return "no record in the fault log (not applied, or nothing matched)"
    values: dict[str, list[Any]] = {}
    for r in records:
        for key, value in _detail(r)[1].items():
            if key not in _QUIET_PARAMS and value is not None:
                values.setdefault(key, []).append(value)
    n = len(records)
    kinds = list(dict.fromkeys(str(r["kind"]) for r in records))
    parts = [
        f"{n} {unit}{'s' if n != 1 else ''}" + (f" ({', '.join(kinds)})" if len(kinds) > 1 else "")
    ]
    for key, vals in sorted(values.items()):
        shown = sorted({json.dumps(v, sort_keys=True, default=str) for v in vals})
        constant = len(shown) == 1
        if constant and scheduled and n > 1 and not key.startswith("applied"):
            continue
        numbers = [float(v) for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(vals):
            lo, hi = min(numbers), max(numbers)
            parts.append(f"{key} {lo:g}" if lo == hi else f"{key} {lo:g} to {hi:g}")
            continue
        words = [json.loads(x) if not x.startswith('"') else x.strip('"') for x in shown]
        more = f" (+{len(words) - 3} more)" if len(words) > 3 else ""
        parts.append(f"{key} {', '.join(map(str, words[:3]))}{more}")
    return "; ".join(parts)


def _unit(kind: str) -> str:
    """What one fault-log record of this kind is: a frame a proxy rule acted on, or a
    fault of its own (a link shaped, a node killed, a client crashed)."""
    return "request" if kind in FRAME_KINDS else "record"


def _heals(action: dict[str, Any], record: dict[str, Any], end_ns: int) -> bool:
    """A node's restart at the end of a kill action is that action healing."""
    return (
        action["kind"] == "kill"
        and record["kind"] == "restart"
        and abs(record["start_ns"] - end_ns) <= SLACK_NS
    )


def _distance(action: dict[str, Any], record: dict[str, Any], window: tuple[int, int]) -> int:
    """How far a fitting record starts from where its action would make it."""
    return abs((window[1] if _heals(action, record, window[1]) else window[0]) - record["start_ns"])


def _fits(action: dict[str, Any], record: dict[str, Any], start_ns: int, end_ns: int) -> bool:
    if record["kind"] != action["kind"] and not _heals(action, record, end_ns):
        return False
    if not start_ns - SLACK_NS <= record["start_ns"] <= end_ns + SLACK_NS:
        return False
    target, _ = _detail(record)
    if action.get("node") is not None and "node" in target:
        return bool(target["node"] == action["node"])
    text = str(record.get("target") or "")
    if action["kind"] in ("kill", "pause", "restart", "crash_producer", "crash_consumer"):
        return True
    return any(fnmatchcase(text, p) for p in _links(action)) or not text


def group_faults(
    schedule: list[dict[str, Any]], faults: list[dict[str, Any]], origin_ns: int | None
) -> list[FaultAction]:
    """One :class:`FaultAction` per scheduled action (``at`` is seconds after ``origin_ns``,
    the workload's start), plus merged bands of the records none explains; in time order."""
    windows = []
    if origin_ns is not None:
        for a in schedule:
            start = origin_ns + int(float(a["at"]) * SEC)
            windows.append((start, start + int(float(a.get("duration") or 0) * SEC)))
    owned: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(windows))}
    loose: list[dict[str, Any]] = []
    for r in sorted(faults, key=lambda r: r["start_ns"]):
        rule = str(_detail(r)[1].get("rule") or "")
        named = _ACTION_RULE.match(rule)
        index = _detail(r)[1].get("action")
        if named is not None:
            index = int(named.group(1))
        if not (isinstance(index, int) and index in owned):
            fitting = [i for i, (lo, hi) in enumerate(windows) if _fits(schedule[i], r, lo, hi)]
            index = min(fitting, key=lambda i: _distance(schedule[i], r, windows[i]), default=None)
        if index is None:
            loose.append(r)
        else:
            owned[index].append(r)
    out: list[FaultAction] = []
    for i, (lo, hi) in enumerate(windows):
        a, recs = schedule[i], owned[i]
        applied = None
        if recs:
            applied = (
                min(r["start_ns"] for r in recs),
                max(r["end_ns"] if r["end_ns"] is not None else r["start_ns"] for r in recs),
            )
        out.append(
            FaultAction(
                number=0,
                kind=a["kind"],
                target=schedule_target(a),
                origin=str(a.get("origin") or "action"),
                scheduled=(lo, hi),
                applied=applied,
                records=len(recs),
                params=schedule_params(a),
                effect=_effect(recs, _unit(a["kind"]), scheduled=True),
                index=i,
            )
        )
    out += _merge_loose(loose)
    out.sort(key=lambda f: (f.window[0], f.index if f.index is not None else 1 << 30))
    for n, f in enumerate(out, 1):
        f.number = n
    return out


def _merge_loose(records: list[dict[str, Any]]) -> list[FaultAction]:
    open_: dict[tuple[str, str], list[dict[str, Any]]] = {}
    groups: list[list[dict[str, Any]]] = []
    for r in records:  # in start order
        key = (str(r["kind"]), str(r.get("target") or ""))
        cur = open_.get(key)
        end = max((x["end_ns"] or x["start_ns"]) for x in cur) if cur else 0
        if cur is not None and r["start_ns"] <= end + MERGE_GAP_NS:
            cur.append(r)
        else:
            open_[key] = [r]
            groups.append(open_[key])
    out = []
    for recs in groups:
        lo = min(r["start_ns"] for r in recs)
        hi = max(r["end_ns"] if r["end_ns"] is not None else r["start_ns"] for r in recs)
        out.append(
            FaultAction(
                number=0,
                kind=str(recs[0]["kind"]),
                target=str(recs[0].get("target") or "—"),
                origin="unscheduled",
                scheduled=None,
                applied=(lo, hi),
                records=len(recs),
                params="not in the schedule",
                effect=_effect(recs, _unit(str(recs[0]["kind"])), scheduled=False),
            )
        )
    return out


SCHEDULE_JSON = "schedule.json"


def read_schedule(run_dir: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The run's nemesis schedule (``schedule.json``, written by the orchestrator), and a note
    when it is there but unreadable (the report then shows the fault log only)."""
    path = Path(run_dir) / SCHEDULE_JSON
    if not path.exists():
        return [], None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [], f"{path} is unreadable ({e}): the report shows the fault log only"
    ok = isinstance(data, list) and all(
        isinstance(a, dict)
        and isinstance(a.get("kind"), str)
        and isinstance(a.get("at"), int | float)
        for a in data
    )
    if not ok:
        return [], f"{path} is not a list of actions: the report shows the fault log only"
    return data, None
