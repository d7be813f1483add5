"""junit.xml: one test case per run, named so CI systems can track it night after night.

* The test case's name is its scenario's (``nightly-network``; a scenario run several times in
  a night: ``nightly-network (run 2)``, ...), its class ``txnchaos.nightly``: the same name
  every night, so a CI system's history, flakiness and "fixed since" follow the scenario.  The
  seed is a property, never part of the name.
* Each case has a timestamp and properties: the seed, the scenario file, the cluster (flavour,
  version, transaction.version), the faults scheduled and applied, the verdict and the command
  that repeats the run.
* A run that did not pass has one ``failure`` (an ``error`` when the harness failed) whose type
  is its most serious problem: ``unexpected_verdict``, ``node_error``, ``client_crash``,
  ``client_hang``, ``no_chaos``, ``nemesis`` (results.PROBLEMS); its message says what was
  found and how to repeat it, and its text every detail.  A CI user only reads what is not
  green: a valid verdict under chaos that did not happen, beside a node that raised, or beside
  a client that crashed or hung, is not green.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from ...rundir.cluster_identity import describe_cluster
from .results import (
    CLIENT_CRASH,
    CLIENT_HANG,
    HARNESS,
    NEMESIS,
    NO_CHAOS,
    NODE_ERROR,
    UNEXPECTED,
    RunRow,
)

SUITE = "txnchaos-nightly"
CLASSNAME = "txnchaos.nightly"


def case_names(rows: list[RunRow]) -> list[str]:
    """Each run's stable test case name: its scenario's, ``(run N)`` for the N-th run of a
    scenario in the night."""
    seen: Counter[str] = Counter()
    names = []
    for r in rows:
        seen[r.scenario] += 1
        n = seen[r.scenario]
        names.append(r.scenario if n == 1 else f"{r.scenario} (run {n})")
    return names


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"


def properties(r: RunRow) -> dict[str, str]:
    """What a CI system shows beside the case (and filters on)."""
    cluster = r.cluster or {}
    props = {
        "seed": str(r.seed),
        "scenario_file": r.scenario_file,
        "cluster.flavour": str(cluster.get("flavour") or "unknown"),
        "cluster.version": str(cluster.get("version") or "unknown"),
        "transaction.version": str(
            cluster["transaction_version"]
            if cluster.get("transaction_version") is not None
            else "unknown"
        ),
        "faults.scheduled": _kinds(r.faults),
        "faults.applied": _kinds(r.faults_applied),
        "verdict": r.verdict,
        "expected": r.expected,
        "repeat": r.command,
        "run_dir": r.run_dir,
    }
    if r.report:
        props["report"] = r.report
    return props


def _what(r: RunRow, problem: str) -> str:
    """What was found, for one problem, in a phrase."""
    if problem == UNEXPECTED:
        anomalies = ", ".join(f"{k}={v}" for k, v in sorted(r.anomalies.items()))
        found = f"verdict {r.verdict}, expected {r.expected}"
        return f"{found}: {anomalies}" if anomalies else found
    if problem in (CLIENT_CRASH, CLIENT_HANG, NODE_ERROR):
        return "; ".join(r.findings_of(problem))
    if problem == NO_CHAOS:
        return f"no chaos: {r.no_chaos}; the {r.verdict} verdict tested no fault"
    if problem == NEMESIS:
        n = len(r.nemesis_errors)
        return f"nemesis errors {n}: the faults were not all carried out as scheduled"
    return problem


def failure_message(r: RunRow) -> str:
    """What was found (every problem, most serious first) and how to repeat it."""
    found = " | ".join(_what(r, p) for p in r.problems if p != HARNESS)
    shrunk = ""
    if r.shrunk:
        n = r.shrink_reruns or 0
        shrunk = f"; minimal scenario {r.shrunk} ({n} re-run{'' if n == 1 else 's'})"
    return f"{found}; repeat: {r.command}{shrunk}"


def failure_text(r: RunRow) -> str:
    lines = [f"verdict {r.verdict}, expected {r.expected}"]
    lines.append(f"cluster: {describe_cluster(r.cluster or {})}")
    for checker, count in sorted(r.anomalies.items()):
        lines.append(f"{checker}: {count} anomal{'y' if count == 1 else 'ies'}")
    lines += [f"finding: {f}" for f in r.findings]
    if r.no_chaos:
        lines.append(f"no chaos: {r.no_chaos}")
    if r.nemesis:
        lines.append(f"nemesis: {r.nemesis}")
    lines += [f"nemesis error: {e}" for e in r.nemesis_errors]
    if r.report:
        lines.append(f"report: {r.report}")
    lines.append(f"repeat: {r.command}")
    if r.shrunk:
        lines.append(f"minimal scenario: {r.shrunk} (txnchaos run {r.shrunk})")
    if r.shrink_note:
        lines.append(f"shrink: {r.shrink_note}")
    return "\n".join(lines)


def write_junit(
    rows: list[RunRow], path: Path, wall_s: float, summary: dict[str, Any] | None = None
) -> None:
    """junit.xml for ``rows``; ``summary`` (the night's summary.json) adds the suite's start
    and the command that repeats the night."""
    summary = summary or {}
    failures = sum(1 for r in rows if not r.passed and HARNESS not in r.problems)
    errors = sum(1 for r in rows if HARNESS in r.problems)
    suites = ET.Element(
        "testsuites",
        name=SUITE,
        tests=str(len(rows)),
        failures=str(failures),
        errors=str(errors),
        time=f"{wall_s:.1f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=SUITE,
        tests=str(len(rows)),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
        time=f"{wall_s:.1f}",
        hostname=socket.gethostname(),
    )
    if summary.get("started"):
        suites.set("timestamp", str(summary["started"]))
        suite.set("timestamp", str(summary["started"]))
    night = {k: str(summary[k]) for k in ("night", "seed_base", "repeat") if summary.get(k)}
    if night:
        props = ET.SubElement(suite, "properties")
        for k, v in night.items():
            ET.SubElement(props, "property", name=k, value=v)
    for r, name in zip(rows, case_names(rows), strict=True):
        case = ET.SubElement(
            suite,
            "testcase",
            classname=CLASSNAME,
            name=name,
            time=f"{r.wall_s:.1f}",
            timestamp=r.started,
            file=r.scenario_file,
        )
        props = ET.SubElement(case, "properties")
        for k, v in properties(r).items():
            ET.SubElement(props, "property", name=k, value=v)
        problems = r.problems
        if HARNESS in problems:
            error = ET.SubElement(
                case,
                "error",
                message=f"the harness failed; repeat: {r.command}",
                type=HARNESS,
            )
            error.text = f"{r.failure or ''}\nrepeat: {r.command}\nlog: {r.log}"
        elif problems:
            failure = ET.SubElement(case, "failure", message=failure_message(r), type=problems[0])
            failure.text = failure_text(r)
        out = ET.SubElement(case, "system-out")
        out.text = f"run directory: {r.run_dir}\nlog: {r.log}"
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
