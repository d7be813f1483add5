"""The verdict: per checker valid / invalid / unknown, counts per kind, first examples with
evidence; overall validity; and the summaries the report plots.  Serialised as verdict.json."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..rundir.cluster_identity import cluster_settings
from ..rundir.verdict_file import (
    INVALID,
    UNKNOWN,
    VALID,
    cluster_line,
    engine_line,
    finding_line,
    nemesis_error_line,
    nemesis_line,
)

__all__ = [
    "INVALID",
    "UNKNOWN",
    "VALID",
    "CheckerVerdict",
    "Resembles",
    "Verdict",
    "overall_status",
    "run_settings",
]

#: (the checkers that flagged a run, its cluster's ``key=value`` settings) -> sentences naming
#: the known bugs it resembles: the reproduction catalogue's, which the analysis does not
#: know; the layer above supplies it (jobs/, from harness/repro/resemblance.py)
Resembles = Callable[[set[str], list[str]], list[str]]
#: the engines that judge a run; ``auto`` lets analysis/analyze.py choose by history size
AUTO, SPARK, REFERENCE = "auto", "spark", "reference"
ENGINES = (AUTO, SPARK, REFERENCE)


@dataclass
class CheckerVerdict:
    name: str
    status: str
    definition: str
    counts: dict[str, int]
    anomaly_count: int
    examples: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)


@dataclass
class Verdict:
    run_dir: str
    status: str
    checkers: dict[str, CheckerVerdict]
    stats: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    #: plot data (not part of the judgement): per-second op timeline, anomaly timeline, LSO lag
    series: dict[str, Any] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    run: dict[str, Any] = field(default_factory=dict)
    #: what reading the run directory skipped (torn lines of writers stopped mid-write)
    notes: list[str] = field(default_factory=list)
    #: which engine judged: Spark, or the plain-Python reference checkers (small histories)
    engine: str | None = None
    #: how the nemesis carried out its schedule (nemesis_outcome.py); None: no nemesis log
    nemesis: dict[str, Any] | None = None
    #: the known bugs an invalid run resembles, in words (see :data:`Resembles`)
    resembles: list[str] = field(default_factory=list)
    #: what was judged: the cluster's flavour, version and transaction.version (run.json's)
    cluster: dict[str, Any] = field(default_factory=dict)
    #: the Spark application that judged (master, application id and name, version, how its
    #: session started); None when the reference engine judged
    spark: dict[str, Any] | None = None
    #: what the run found besides anomalies (findings.py): client crashes and hangs, node
    #: errors; each one makes the exit code 1 without touching the cluster's status
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.status != INVALID

    @property
    def exit_code(self) -> int:
        return 1 if self.status == INVALID or self.findings else 0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("series")
        return d

    def write(self, path: str | os.PathLike[str]) -> None:
        p = Path(path)
        tmp = p.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, default=str), encoding="utf-8")
        tmp.replace(p)

    def cluster_name(self) -> str | None:
        """What ran, from run.json: ``apache-kafka 4.4.0``, ``txnchaos 0.1.0`` (None: unknown)."""
        cluster = self.run.get("cluster")
        if not isinstance(cluster, dict) or not cluster.get("flavour"):
            return None
        return " ".join(str(x) for x in (cluster["flavour"], cluster.get("version")) if x)

    def summary(self) -> str:
        cluster = self.cluster_name()
        on = f" on {cluster}" if cluster else ""
        found = ""
        if self.findings:
            kinds = sorted({str(f.get("kind")).replace("_", " ") for f in self.findings})
            n = len(self.findings)
            found = f", {n} FINDING{'S' if n > 1 else ''} ({', '.join(kinds)})"
        lines = [f"verdict: {self.status.upper()}{on}{found}  ({self.run_dir})"]
        lines.append(f"  {engine_line(self.to_json())}")
        lines.append(f"  cluster: {cluster_line(self.cluster)}")
        for c in self.checkers.values():
            detail = (
                ", ".join(f"{k}={v}" for k, v in c.counts.items() if v) if c.anomaly_count else ""
            )
            if c.status == UNKNOWN:
                detail = c.reason or ""
            lines.append(f"  {c.name:<28} {c.status:<8} {c.anomaly_count:>8}  {detail}")
        if self.stats:
            s = self.stats
            lines.append(
                f"  events={s.get('events', 0)} ops={s.get('ops', 0)} "
                f"transactions={s.get('transactions', {})}"
            )
        lines += [f"  note: {n}" for n in self.notes]
        if self.nemesis is not None:
            lines.append(f"  nemesis: {nemesis_line(self.nemesis)}")
            lines += [f"  nemesis error: {nemesis_error_line(e)}" for e in self.nemesis["errors"]]
        if self.findings:
            lines += [f"  FINDING {finding_line(f)}" for f in self.findings]
            repeat = next((f["repeat"] for f in self.findings if f.get("repeat")), None)
            if repeat:
                lines.append(f"  repeat: {repeat}")
        return "\n".join(lines)


def run_settings(run: dict[str, Any]) -> list[str]:
    """The cluster's ``key=value`` settings as run.json records them (local and docker)."""
    return cluster_settings(run)


def resemblance(verdict: Verdict, resembles: Resembles | None) -> list[str]:
    """What ``resembles`` says of an invalid verdict (nothing of a valid one)."""
    flagged = {c.name for c in verdict.checkers.values() if c.status == INVALID}
    if resembles is None or not flagged:
        return []
    return resembles(flagged, run_settings(verdict.run))


def overall_status(checkers: dict[str, CheckerVerdict]) -> str:
    statuses = {c.status for c in checkers.values()}
    if INVALID in statuses:
        return INVALID
    if statuses == {UNKNOWN}:
        return UNKNOWN
    return VALID
