"""junit.xml: one test case per run, so CI systems list and count the night's runs.
An unexpected verdict is a failure carrying the anomalies; a harness failure is an
error carrying its reason (or the log's last lines).  A run whose nemesis failed is a
failure too (type ``nemesis``), even with the expected verdict: a valid verdict under chaos
that did not happen is no evidence, and a CI user only reads what is not green."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .results import HARNESS_FAILED, RunRow


def failure_text(row: RunRow) -> str:
    lines = [f"verdict {row.verdict}, expected {row.expected}"]
    for checker, count in sorted(row.anomalies.items()):
        lines.append(f"{checker}: {count} anomal{'y' if count == 1 else 'ies'}")
    if row.report:
        lines.append(f"report: {row.report}")
    lines.append(f"repeat: {row.command}")
    if row.shrunk:
        lines.append(f"minimal scenario: {row.shrunk} (txnchaos run {row.shrunk})")
    if row.shrink_note:
        lines.append(f"shrink: {row.shrink_note}")
    if row.nemesis_errors:
        lines.append(f"nemesis: {row.nemesis}")
        lines += [f"nemesis error: {e}" for e in row.nemesis_errors]
    return "\n".join(lines)


def shrink_message(row: RunRow) -> str:
    """The failure message's pointer to the minimal scenario, or "" when there is none."""
    if not row.shrunk:
        return ""
    n = row.shrink_reruns or 0
    return f"; minimal scenario {row.shrunk} ({n} re-run{'' if n == 1 else 's'})"


def write_junit(rows: list[RunRow], path: Path, wall_s: float) -> None:
    failures = sum(1 for r in rows if not r.passed and r.verdict != HARNESS_FAILED)
    errors = sum(1 for r in rows if r.verdict == HARNESS_FAILED)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="txnchaos-nightly",
        tests=str(len(rows)),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
        time=f"{wall_s:.1f}",
    )
    for r in rows:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"txnchaos.nightly.{r.scenario}",
            name=f"{r.scenario} seed={r.seed}",
            time=f"{r.wall_s:.1f}",
        )
        if r.verdict == HARNESS_FAILED:
            error = ET.SubElement(case, "error", message="the harness failed", type="harness")
            error.text = f"{r.failure or ''}\nrepeat: {r.command}\nlog: {r.log}"
        elif not r.passed:
            anomalies = ", ".join(f"{k}={v}" for k, v in sorted(r.anomalies.items()))
            kind = r.verdict
            message = f"{r.outcome} (expected {r.expected})"
            if r.verdict == r.expected:  # only the nemesis failed
                kind = "nemesis"
                message = f"{r.outcome}: the faults were not all carried out as scheduled"
            message = f"{message}: {anomalies}" if anomalies else message
            failure = ET.SubElement(case, "failure", message=message + shrink_message(r), type=kind)
            failure.text = failure_text(r)
        out = ET.SubElement(case, "system-out")
        out.text = f"run directory: {r.run_dir}\nlog: {r.log}"
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
