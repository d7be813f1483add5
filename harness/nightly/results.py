"""What one finished nightly run says, read from its run directory (verdict.json,
run.json) into one summary row."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...rundir.cluster_identity import cluster_identity
from ...rundir.verdict_file import (
    anomalies_by_checker,
    finding_line,
    nemesis_error_line,
    nemesis_line,
    no_chaos,
)

VALID = "valid"
INVALID = "invalid"
HARNESS_FAILED = "harness_failed"

#: why a run did not pass, most serious first (a row's ``problems``; JUnit's failure types)
HARNESS = "harness"  # the harness failed: no verdict
UNEXPECTED = "unexpected_verdict"  # valid where invalid was expected, or the other way round
NODE_ERROR = "node_error"  # an exception escaped a cluster node's code (the verdict's findings)
CLIENT_CRASH = "client_crash"  # a client library crashed (the verdict's findings)
CLIENT_HANG = "client_hang"  # a client library's call never returned (the verdict's findings)
NO_CHAOS = "no_chaos"  # faults were scheduled and none was applied
NEMESIS = "nemesis"  # the nemesis had errors: not every fault was carried out
PROBLEMS = (HARNESS, UNEXPECTED, NODE_ERROR, CLIENT_CRASH, CLIENT_HANG, NO_CHAOS, NEMESIS)
#: how finding_line begins each kind's line (rundir/verdict_file.py)
_FINDING_PREFIX = {
    NODE_ERROR: "node error:",
    CLIENT_CRASH: "client crash:",
    CLIENT_HANG: "client hang:",
}


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
    #: the verdict's findings in a line each (node errors, client crashes): a finding fails
    #: the run
    findings: list[str] = field(default_factory=list)
    #: why the run tested no chaos although faults were scheduled (none applied), if so
    no_chaos: str | None = None
    #: the cluster judged (run.json): flavour, version, transaction.version, launcher
    cluster: dict[str, Any] = field(default_factory=dict)
    #: faults applied by kind (the nemesis log), where ``faults`` counts those scheduled
    faults_applied: dict[str, int] = field(default_factory=dict)
    #: the engine that judged (the verdict's ``engine``: spark, reference)
    engine: str | None = None

    @property
    def problems(self) -> list[str]:
        """Why the run did not pass, most serious first (empty: it passed)."""
        out = []
        if self.verdict == HARNESS_FAILED:
            out.append(HARNESS)
        elif self.verdict != self.expected:
            out.append(UNEXPECTED)
        out += [kind for kind in (NODE_ERROR, CLIENT_CRASH, CLIENT_HANG) if self.findings_of(kind)]
        if self.no_chaos:
            out.append(NO_CHAOS)
        if self.nemesis_errors:
            out.append(NEMESIS)
        return out

    def findings_of(self, kind: str) -> list[str]:
        """The finding lines of one kind (NODE_ERROR, CLIENT_CRASH, CLIENT_HANG)."""
        return [f for f in self.findings if f.startswith(_FINDING_PREFIX[kind])]

    @property
    def judged(self) -> str:
        """What was judged and by what: ``txnchaos 0.1.0, TV 2; spark``."""
        c = self.cluster or {}
        name = " ".join(str(x) for x in (c.get("flavour"), c.get("version")) if x) or "?"
        tv = c.get("transaction_version")
        engine = f"; {self.engine}" if self.engine else ""
        return f"{name}, TV {tv if tv is not None else '?'}{engine}"

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def status_class(self) -> str:
        """The row's class on the pages: ``passed`` or its most serious problem."""
        problems = self.problems
        return problems[0] if problems else "passed"

    @property
    def outcome(self) -> str:
        """The verdict as shown, with what else failed: ``valid, client crash``, ``valid,
        no chaos``, ``valid, nemesis errors 2``."""
        parts = [self.verdict]
        for kind, one, many in (
            (NODE_ERROR, "node error", "node errors"),
            (CLIENT_CRASH, "client crash", "client crashes"),
            (CLIENT_HANG, "client hang", "client hangs"),
        ):
            n = len(self.findings_of(kind))
            if n:
                parts.append(one if n == 1 else f"{many} {n}")
        if self.no_chaos:
            parts.append("no chaos")
        if self.nemesis_errors:
            parts.append(f"nemesis errors {len(self.nemesis_errors)}")
        return ", ".join(parts)

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


def applied_by_kind(run_dir: Path) -> dict[str, int]:
    """The faults the nemesis applied, by kind (nemesis.jsonl's successful apply steps)."""
    from ...rundir.outcome_log import read_outcomes

    lines, _ = read_outcomes(run_dir)
    applied = {
        (line["action"], line.get("kind"))
        for line in lines or []
        if line["step"] == "apply" and not line.get("error")
    }
    return dict(sorted(Counter(str(kind) for _, kind in applied).items()))


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
        row.engine = str(verdict["engine"]) if verdict.get("engine") else None
        row.committed, row.throughput = throughput_of(verdict)
        nemesis = verdict.get("nemesis")
        if isinstance(nemesis, dict):
            row.nemesis = nemesis_line(nemesis)
            row.nemesis_errors = [nemesis_error_line(e) for e in nemesis.get("errors") or []]
            row.no_chaos = no_chaos(nemesis)
        row.findings = [finding_line(f) for f in verdict.get("findings") or []]
    row.faults_applied = applied_by_kind(run_dir)
    info = _json(run_dir / "run.json")
    if info is not None:
        row.cluster = cluster_identity(info)
    if (run_dir / "report.html").is_file():
        row.report = f"{row.run_dir}/report.html"
    if row.verdict == HARNESS_FAILED:
        run = _json(run_dir / "run.json") or {}
        row.failure = str(run.get("failure") or "") or last_lines(night_dir / row.log)
    return row
