"""``verdict.json`` as the commands that read it back see it: its status, the checkers that
found anomalies, the nemesis section and the findings in words (nightly rows, reproduction
outcomes, shrinking). The analysis writes it (analysis/verdict.py); this is the reading side, so the
layers above the analysis's peer, the harness, need not import the analysis to read one.
Cheap to import (the command line reads it): nothing here imports pyarrow."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: the verdict and the report, in the run directory (run_dir.py lists the whole layout)
VERDICT_JSON = "verdict.json"
REPORT_HTML = "report.html"

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"


def read_verdict(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run directory's verdict.json, or None when it has none or it is unreadable."""
    try:
        value = json.loads((Path(run_dir) / VERDICT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def anomalies_by_checker(verdict: dict[str, Any]) -> dict[str, int]:
    """Anomalies per checker that found some, from a verdict.json (at least 1 per invalid
    checker, whatever its count says)."""
    out: dict[str, int] = {}
    for name, checker in (verdict.get("checkers") or {}).items():
        if not isinstance(checker, dict) or checker.get("status") != INVALID:
            continue
        count = checker.get("anomaly_count")
        out[str(name)] = int(count) if isinstance(count, int) and count > 0 else 1
    return out


def nemesis_line(section: dict[str, Any]) -> str:
    """The verdict's ``nemesis`` section in one line (the verdict's summary, the report, a
    nightly row)."""
    parts = [f"{section['scheduled']} fault(s) scheduled, {section['applied']} applied"]
    for key, words in (
        ("failed", "failed"),
        ("not_reached", "never reached"),
        ("unhealed", "left unhealed"),
        ("heals_retried", "heal(s) retried"),
    ):
        if section.get(key):
            parts.append(f"{section[key]} {words}")
    n = len(section.get("errors") or [])
    parts.append(f"{n} error{'s' if n != 1 else ''}" if n else "no errors")
    return ", ".join(parts)


def nemesis_error_line(error: dict[str, Any]) -> str:
    """One error of the ``nemesis`` section as a line."""
    at = error.get("at")
    when = f" (due at {float(at):.1f} s)" if isinstance(at, int | float) else ""
    return f"action {error['action']} {error.get('kind')}: {error['step']} failed{when}: " + str(
        error["error"]
    )


def no_chaos(section: dict[str, Any] | None) -> str | None:
    """Why the run tested no chaos although its scenario asked for some (faults scheduled, none
    applied: all failed or never reached), or None, from the ``nemesis`` section.  A scenario
    without a nemesis schedules nothing and is no chaos run; a random mix always schedules at
    least one fault."""
    if not section or not section.get("scheduled") or section.get("applied"):
        return None
    parts = [f"{section['scheduled']} scheduled"]
    for key, words in (("failed", "failed"), ("not_reached", "never reached")):
        if section.get(key):
            parts.append(f"{section[key]} {words}")
    return f"no fault was applied ({', '.join(parts)})"


#: the kinds of finding (the verdict's ``findings``: analysis/findings.py): a client library
#: crashed; a client library's call never returned (rundir/client_hangs.py); an exception
#: escaped a txnchaos node's code (rundir/node_errors.py)
CLIENT_CRASH = "client_crash"
CLIENT_HANG = "client_hang"
NODE_ERROR = "node_error"
#: how far before a crash a healed fault is still listed (``faults_before``): a lost response
#: surfaces when its request times out, up to a transaction timeout later
BEFORE_S = 30.0


def finding_line(f: dict[str, Any]) -> str:
    """A finding of the verdict in one line (the verdict's summary, the report, nightly,
    JUnit)."""
    if f.get("kind") == NODE_ERROR:
        return _node_error_line(f)
    if f.get("kind") == CLIENT_HANG:
        return _client_hang_line(f)
    if f.get("kind") != CLIENT_CRASH:
        return f"{f.get('kind')}: {f}"
    lib, at = _library(f), _at(f)
    flight = ", ".join(
        f"{o.get('type')}" + (f" txn {o['txn']}" if o.get("txn") is not None else "")
        for o in (f.get("in_flight") or [])[-3:]
    )
    active, before = _faults(f, "faults_active"), _faults(f, "faults_before")
    return (
        f"client crash: {f['process']} ({f.get('user_kind')}, {lib}){at}: "
        f"{f.get('signal') or 'exit ' + str(f.get('exit_code'))}: {f.get('message')}; "
        f"in flight: {flight or 'nothing'}; faults active: {active}; "
        f"healed in the {BEFORE_S:g} s before: {before}"
    )


def _client_hang_line(f: dict[str, Any]) -> str:
    lib, at = _library(f), _at(f)
    txn = f" txn {f['txn']}" if f.get("txn") is not None else ""
    issue = f" ({f['issue']})" if f.get("issue") else ""
    timeout = f.get("timeout_s")
    timeout_text = f"{timeout:g}" if isinstance(timeout, int | float) else str(timeout)
    waited = f.get("waited_s")
    after = f" after {waited:.1f} s" if isinstance(waited, int | float) else ""
    active, before = _faults(f, "faults_active"), _faults(f, "faults_before")
    return (
        f"client hang: {f['process']} ({f.get('user_kind')}, {lib}){at}: "
        f"{f.get('call')}(timeout={timeout_text} s) never returned{issue}; "
        f"given up{after}: {f.get('type')}{txn} recorded info, the producer abandoned and "
        f"replaced; faults active: {active}; healed in the {BEFORE_S:g} s before: {before}"
    )


def _node_error_line(f: dict[str, Any]) -> str:
    at = _at(f)
    nodes = ", ".join(f.get("nodes") or [str(f.get("node"))])
    times = f" ({f['count']} times)" if (f.get("count") or 1) > 1 else ""
    detail = f": {f['detail']}" if f.get("detail") else ""
    logged = f"; logged as: {f['message']}" if f.get("message") else ""
    active = _faults(f, "faults_active")
    return (
        f"node error: {nodes}{at}{times}: {f.get('exception')}{detail} in {f.get('where')}"
        f"{logged}; faults active: {active}"
    )


def _library(f: dict[str, Any]) -> str:
    return " ".join(str(x) for x in (f.get("library"), f.get("library_version")) if x)


def _at(f: dict[str, Any]) -> str:
    """`` at +12.3 s`` from a finding's ``at_s``, or nothing."""
    return f" at +{f['at_s']:.1f} s" if isinstance(f.get("at_s"), int | float) else ""


def _faults(f: dict[str, Any], key: str) -> str:
    """A finding's faults under ``key`` (faults_active, faults_before) in words, or none."""
    return ", ".join(_fault_words(x) for x in f.get(key) or []) or "none"


def _fault_words(x: dict[str, Any]) -> str:
    target = f" on {x['target']}" if x.get("target") else ""
    when = x.get("applied_at_s")
    span = ""
    if isinstance(when, int | float):
        healed = x.get("healed_at_s")
        end = f"{healed:.1f}" if isinstance(healed, int | float) else "end"
        span = f" (+{when:.1f}..{end} s)"
    return f"{x.get('kind')}{target}{span}"


#: the flavour of a cluster whose run.json does not say it, by the launcher that started it
FLAVOUR_OF_LAUNCHER = {
    "local": "txnchaos",
    "docker": "txnchaos",
    "kafka": "apache-kafka",
    "external": "external",
}


def judged_cluster(run: dict[str, Any]) -> dict[str, Any]:
    """What cluster a run judged, from its run.json: ``flavour`` (``txnchaos``,
    ``apache-kafka``, ``external``), ``version`` (null when unknown) and the finalised
    ``transaction_version`` (null when unknown). A run.json without them (written before the
    cluster described itself): the flavour from the launcher's name, the transaction version
    from the cluster's ``transaction.version`` setting."""
    cluster = run.get("cluster") if isinstance(run.get("cluster"), dict) else {}
    assert isinstance(cluster, dict)
    launcher = cluster.get("launcher") or run.get("cluster_kind")
    flavour = cluster.get("flavour") or FLAVOUR_OF_LAUNCHER.get(str(launcher))
    tv = cluster.get("transaction_version", run.get("transaction_version"))
    if tv is None:
        spec = cluster.get("spec") if isinstance(cluster.get("spec"), dict) else {}
        for setting in (spec or {}).get("settings") or []:
            key, _, value = str(setting).partition("=")
            if key.strip() == "transaction.version" and value.strip().isdigit():
                tv = int(value.strip())
    return {
        "flavour": flavour,
        "version": cluster.get("version"),
        "transaction_version": tv if isinstance(tv, int) else None,
    }


def cluster_line(cluster: dict[str, Any] | None) -> str:
    """``txnchaos 0.1.0, transaction.version 2`` (unknowns said so)."""
    c = cluster or {}
    name = " ".join(str(x) for x in (c.get("flavour") or "unknown", c.get("version")) if x)
    tv = c.get("transaction_version")
    return f"{name}, transaction.version {tv if tv is not None else 'unknown'}"


def engine_line(verdict: dict[str, Any]) -> str:
    """Which engine judged, where and how long it took: ``judged by PySpark 4.0.1 on
    local[2] (application local-1764..., "txnchaos run smoke") in 14.2 s, ...``."""
    engine = verdict.get("engine")
    total = (verdict.get("timings") or {}).get("total_s")
    took = f" in {total:.1f} s" if isinstance(total, int | float) else ""
    if engine == "reference":
        return f"judged by the plain-Python rules (--engine reference, no JVM){took}"
    spark = verdict.get("spark")
    if engine != "spark" or not isinstance(spark, dict):
        return f"judged by {engine or 'an unknown engine'}{took}"
    text = (
        f"judged by PySpark {spark.get('version')} on {spark.get('master')} (application "
        f'{spark.get("app_id")}, "{spark.get("app_name")}"){took}'
    )
    start, how = spark.get("session_start_s"), spark.get("session")
    if not isinstance(start, int | float):
        return text
    waited, warm = spark.get("session_wait_s"), spark.get("warm_up_s")
    if how == "started during the run":
        warmed = f" and warmed up in {warm:.1f} s" if isinstance(warm, int | float) else ""
        after = f", {waited:.1f} s of it after the run" if isinstance(waited, int | float) else ""
        return (
            f"{text}; its Spark session started in {start:.1f} s{warmed} while the run went "
            f"on{after}"
        )
    if how == "reused":
        return f"{text}; its Spark session was up already (started in {start:.1f} s, earlier)"
    return f"{text}, {start:.1f} s of it starting the Spark session"
