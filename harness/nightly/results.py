"""What one finished nightly run says, read from its run directory (verdict.json,
run.json) into one summary row."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...rundir.verdict_file import anomalies_by_checker, nemesis_error_line, nemesis_line

VALID = "valid"
INVALID = "invalid"
HARNESS_FAILED = "harness_failed"


@dataclass
class RunRow:
    index: int
    scenario: str
    scenario_file: str
    seed: int
    verdict: str  # valid | invalid | harness_failed
    expected: str  # the scenario's expected verdict
    exit_code: int
    wall_s: float
    started: str  # ISO-8601, UTC
    run_dir: str  # relative to the night's directory
    log: str
    command: str  # repeats this run exactly
    report: str | None = None
    anomalies: dict[str, int] = field(default_factory=dict)  # checker -> anomalies
    committed: int | None = None
    throughput: float | None = None  # committed transactions per workload second
    faults: dict[str, int] = field(default_factory=dict)  # kind -> faults injected
    failure: str | None = None  # why the harness failed, or what went wrong
    #: an unexpectedly invalid run shrunk (shrinking.py): the minimal scenario (relative to the
    #: night's directory), the re-runs it took, what came of it, and the shrinker's log
    shrunk: str | None = None
    shrink_reruns: int | None = None
    shrink_note: str | None = None
    shrink_log: str | None = None
    #: how the nemesis carried out the schedule (the verdict's ``nemesis`` section in a line)
    #: and its errors: a run whose faults were not all carried out did not test what its
    #: scenario asks, so it does not pass, whatever its verdict
    nemesis: str | None = None
    nemesis_errors: list[str] = field(default_factory=list)
    #: what was judged, from the verdict: the cluster (flavour and version), its
    #: transaction.version, and the engine that judged
    cluster: str | None = None
    transaction_version: int | None = None
    engine: str | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == self.expected and not self.nemesis_errors

    @property
    def outcome(self) -> str:
        """The verdict as shown: ``valid, nemesis errors 2`` when the nemesis failed."""
        n = len(self.nemesis_errors)
        return f"{self.verdict}, nemesis errors {n}" if n else self.verdict

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRow:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def _json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def verdict_of(exit_code: int, verdict: dict[str, Any] | None) -> str:
    if verdict is not None and verdict.get("status") in (VALID, INVALID) and exit_code in (0, 1):
        return str(verdict["status"])
    return HARNESS_FAILED


def faults_by_kind(run_dir: Path) -> dict[str, int]:
    """The run's scheduled faults by kind (schedule.json: one entry per fault, where the
    fault log has one record per frame a rule touched)."""
    try:
        schedule = json.loads((run_dir / "schedule.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(schedule, list):
        return {}
    kinds = Counter(str(f.get("kind")) for f in schedule if isinstance(f, dict))
    return dict(sorted(kinds.items()))


def throughput_of(verdict: dict[str, Any]) -> tuple[int | None, float | None]:
    """(committed transactions, per second of workload) from the verdict's stats."""
    committed = ((verdict.get("stats") or {}).get("transactions") or {}).get("committed")
    run = verdict.get("run") or {}
    started, ended = run.get("workload_started_ns") or run.get("started_ns"), run.get("ended_ns")
    if not isinstance(committed, int):
        return None, None
    if isinstance(started, int) and isinstance(ended, int) and ended > started:
        return committed, round(committed / ((ended - started) / 1e9), 2)
    return committed, None


def last_lines(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def fill_from_run_dir(row: RunRow, night_dir: Path) -> RunRow:
    """Complete ``row`` (its exit code known) from what the run directory holds."""
    run_dir = night_dir / row.run_dir
    verdict = _json(run_dir / "verdict.json")
    row.verdict = verdict_of(row.exit_code, verdict)
    row.faults = faults_by_kind(run_dir)
    if verdict is not None:
        row.anomalies = anomalies_by_checker(verdict)
        judged = verdict.get("cluster") if isinstance(verdict.get("cluster"), dict) else {}
        assert isinstance(judged, dict)
        name = " ".join(str(x) for x in (judged.get("flavour"), judged.get("version")) if x)
        row.cluster = name or None
        tv = judged.get("transaction_version")
        row.transaction_version = tv if isinstance(tv, int) else None
        row.engine = str(verdict["engine"]) if verdict.get("engine") else None
        row.committed, row.throughput = throughput_of(verdict)
        nemesis = verdict.get("nemesis")
        if isinstance(nemesis, dict):
            row.nemesis = nemesis_line(nemesis)
            row.nemesis_errors = [nemesis_error_line(e) for e in nemesis.get("errors") or []]
    if (run_dir / "report.html").is_file():
        row.report = f"{row.run_dir}/report.html"
    if row.verdict == HARNESS_FAILED:
        run = _json(run_dir / "run.json") or {}
        row.failure = str(run.get("failure") or "") or last_lines(night_dir / row.log)
    return row
