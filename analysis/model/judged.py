"""The anomaly row every checker returns, ``(checker, kind, time_ns, weight, evidence)``, and one
rule's result over a run.  Evidence of the history rules is shaped as the Spark implementations'
JSON reads back: null fields of objects are left out (as ``to_json`` does), nulls inside lists
kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

Row = dict[str, Any]
#: why a rule over reads cannot judge a history without them
NO_READS = "no read_committed reads in the history"


def drop_nulls(x: Any) -> Any:
    """``x`` without null object fields, at any depth (list elements are kept)."""
    if isinstance(x, dict):
        return {k: drop_nulls(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [drop_nulls(v) for v in x]
    return x


def row(
    checker: str,
    kind: str,
    time_ns: int | None,
    evidence: dict[str, Any],
    weight: int = 1,
    *,
    as_json: bool = True,
) -> Row:
    """An anomaly row; ``as_json``: evidence as JSON would carry it (see the module doc)."""
    return {
        "checker": checker,
        "kind": kind,
        "time_ns": time_ns,
        "weight": weight,
        "evidence": drop_nulls(evidence) if as_json else evidence,
    }


@dataclass
class Judged:
    """One checker's rows, or the reason it could not judge the history; what it noted and
    how much it checked (as the Spark checker's output says them)."""

    name: str
    kinds: tuple[str, ...]
    rows: list[Row] = field(default_factory=list)
    unknown: str | None = None
    notes: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """Anomalies per kind (a row counts its weight)."""
        out = dict.fromkeys(self.kinds, 0)
        for r in self.rows:
            out[r["kind"]] = out.get(r["kind"], 0) + int(r["weight"])
        return out


class Findings(Protocol):
    """What a rule's parts add to: one checker's result, whichever engine holds it (the rule's
    Judged, the Spark implementation's CheckOutput)."""

    rows: list[dict[str, Any]]
    checked: dict[str, int]
    notes: list[str]
