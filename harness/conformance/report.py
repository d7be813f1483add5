"""Comparing the two sides' outcomes: one row per probe (Kafka, ours, equal?), the details
of every difference, and the verdict (exit 0 only when every probe is equal or explained).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .catalogue import Outcome, Probe
from .explained import explanation

EQUAL = "equal"
EXPLAINED = "explained"
STALE = "equal, explanation can go"
DIFFERENT = "DIFFERENT"
UNRECORDED = "NOT RECORDED"
OTHER_SETTINGS = "RECORDED WITH OTHER SETTINGS"
PASSING = frozenset({EQUAL, EXPLAINED, STALE})


@dataclass
class Row:
    probe: Probe
    kafka: Outcome | None
    ours: Outcome | None
    status: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe.name,
            "tags": list(self.probe.tags),
            "config": self.probe.config.name,
            "kafka": self.kafka,
            "ours": self.ours,
            "status": self.status,
            "note": self.note,
        }


def compare(
    probes: list[Probe],
    kafka: dict[str, Outcome | None],
    ours: dict[str, Outcome],
    settings_problem: dict[str, str] | None = None,
) -> list[Row]:
    rows = []
    for p in probes:
        k, o = kafka.get(p.name), ours.get(p.name)
        why = explanation(p.name, p.base)
        if (settings_problem or {}).get(p.name):
            rows.append(Row(p, k, o, OTHER_SETTINGS, (settings_problem or {})[p.name]))
        elif k is None:
            rows.append(Row(p, k, o, UNRECORDED, "run `txnchaos conformance --record FILE`"))
        elif k == o:
            rows.append(Row(p, k, o, STALE if why else EQUAL, why.label() if why else ""))
        elif why is not None:
            rows.append(Row(p, k, o, EXPLAINED, why.label()))
        else:
            rows.append(Row(p, k, o, DIFFERENT))
    return rows


def passed(rows: list[Row]) -> bool:
    return all(r.status in PASSING for r in rows)


def _short(outcome: Outcome | None, width: int) -> str:
    if outcome is None:
        return "-"
    text = json.dumps(outcome, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


def differences(kafka: Any, ours: Any, path: str = "") -> list[str]:
    """Where two outcomes differ, as ``path: kafka=... ours=...`` lines."""
    if isinstance(kafka, dict) and isinstance(ours, dict):
        out = []
        for key in sorted(set(kafka) | set(ours), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in kafka or key not in ours:
                k, o = kafka.get(key, "(absent)"), ours.get(key, "(absent)")
                out.append(f"{sub}: kafka={_dump(k)} ours={_dump(o)}")
            else:
                out += differences(kafka[key], ours[key], sub)
        return out
    if kafka != ours:
        return [f"{path or '(outcome)'}: kafka={_dump(kafka)} ours={_dump(ours)}"]
    return []


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def render(rows: list[Row], kafka_label: str, ours_label: str, width: int = 44) -> str:
    name_w = max([len("probe"), *(len(r.probe.name) for r in rows)])
    lines = [
        f"conformance: {kafka_label} against {ours_label}",
        "",
        f"{'probe':<{name_w}}  {'Kafka':<{width}}  {'ours':<{width}}  equal?",
    ]
    for r in rows:
        ours = "same" if r.kafka is not None and r.kafka == r.ours else _short(r.ours, width)
        lines.append(
            f"{r.probe.name:<{name_w}}  {_short(r.kafka, width):<{width}}  {ours:<{width}}  "
            f"{r.status}"
        )
    detail = [r for r in rows if r.status != EQUAL]
    if detail:
        lines += ["", "differences and notes:"]
        for r in detail:
            lines.append(f"- {r.probe.name}: {r.status}{' (' + r.note + ')' if r.note else ''}")
            if r.kafka is not None and r.kafka != r.ours:
                lines += [f"    {d}" for d in differences(r.kafka, r.ours)]
    counts = Counter(r.status for r in rows)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines += ["", f"{len(rows)} probes: {summary}", "PASS" if passed(rows) else "FAIL"]
    return "\n".join(lines)
