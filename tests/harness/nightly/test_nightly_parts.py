"""The nightly loop's parts without running a cluster: the plan (rotation, seeds,
budget), what a run directory says, junit.xml, and the trend page across nights."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from txnchaos.analysis.analyze import RunJudge
from txnchaos.harness.nightly.junit import write_junit
from txnchaos.harness.nightly.pages import write_summary_html, write_trend
from txnchaos.harness.nightly.plan import (
    Budget,
    PlanError,
    load_all,
    nth_run,
    parse_duration,
    scenario_files,
)
from txnchaos.harness.nightly.results import HARNESS_FAILED, RunRow, fill_from_run_dir
from txnchaos.harness.nightly.shrinking import shrink_row, wanted

SCENARIO = """name: {name}
duration: {duration}
workload:
  topics: [{{name: events}}]
  users: [{{kind: transactional_producer, topics: [events]}}]
"""


def scenario(tmp: Path, name: str, duration: int = 10) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(SCENARIO.format(name=name, duration=duration))
    return path


def test_scenarios_rotate_and_seeds_count_up(tmp_path: Path) -> None:
    scenario(tmp_path, "b")
    scenario(tmp_path, "a")
    (tmp_path / "notes.txt").write_text("not a scenario")
    planned = load_all(scenario_files([tmp_path]))
    runs = [nth_run(planned, 100, i) for i in range(1, 6)]
    assert [(r.scenario.name, r.seed) for r in runs] == [
        ("a", 100),
        ("b", 101),
        ("a", 102),
        ("b", 103),
        ("a", 104),
    ]
    assert runs[0].label == "001-a-seed100"


def test_bad_inputs_are_refused_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no scenario files"):
        scenario_files([tmp_path])
    with pytest.raises(PlanError, match="no such"):
        scenario_files([tmp_path / "missing.yaml"])
    late = scenario(tmp_path, "late", duration=5)
    late.write_text(
        late.read_text()
        + "nemesis: {actions: [{at: 4, kind: delay, duration: 3, rule: {ms: 10}}]}\n"
    )
    with pytest.raises(PlanError, match="ends after the workload"):
        load_all([late])
    assert load_all([late], duration=20)[0].scenario.name == "late"  # --duration fits it


def test_budget_runs_or_time(tmp_path: Path) -> None:
    planned = load_all([scenario(tmp_path, "a", duration=30)])
    first, second = nth_run(planned, 1, 1), nth_run(planned, 1, 2)
    assert Budget(runs=1).next_fits(first, 1e9, {})
    assert not Budget(runs=1).next_fits(second, 0, {})
    budget = Budget(seconds=200)
    assert budget.next_fits(first, 0, {})  # 30 s + 120 s allowance
    assert not budget.next_fits(first, 60, {})
    assert budget.next_fits(second, 100, {"a": [90.0]})  # measured tonight: 90 s
    assert not budget.next_fits(second, 120, {"a": [90.0]})
    with pytest.raises(PlanError):
        Budget()
    with pytest.raises(PlanError):
        Budget(runs=1, seconds=5)


@pytest.mark.parametrize(
    "text, seconds", [("90", 90), ("90s", 90), ("30m", 1800), ("8h", 28800), ("1h30m", 5400)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1.2.3m", "m", "0s", "5x"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(PlanError):
        parse_duration(text)


def row(index: int, **fields: object) -> RunRow:
    base: dict[str, object] = {
        "index": index,
        "scenario": "smoke",
        "scenario_file": "scenarios/smoke.yaml",
        "seed": 10 + index,
        "verdict": HARNESS_FAILED,
        "expected": "valid",
        "exit_code": -1,
        "wall_s": 12.0,
        "started": "2026-11-25T20:00:00+00:00",
        "run_dir": f"runs/{index:03d}",
        "log": f"logs/{index:03d}.log",
        "command": f"txnchaos run scenarios/smoke.yaml --seed {10 + index}",
    }
    return RunRow(**{**base, **fields})  # type: ignore[arg-type]


def write_run(night: Path, r: RunRow, verdict: dict[str, object] | None) -> None:
    run = night / r.run_dir
    run.mkdir(parents=True)
    (night / "logs").mkdir(exist_ok=True)
    (night / r.log).write_text("starting\nTraceback: boom\nharness failed: no cluster\n")
    schedule = [
        {"at": 1.0, "kind": "delay"},
        {"at": 2.0, "kind": "kill"},
        {"at": 3, "kind": "delay"},
    ]
    (run / "schedule.json").write_text(json.dumps(schedule))
    if verdict is not None:
        (run / "verdict.json").write_text(json.dumps(verdict))
        (run / "report.html").write_text("<html></html>")
    else:
        (run / "run.json").write_text(json.dumps({"failure": "the cluster did not start"}))


SEC = 1_000_000_000


def verdict(status: str, anomalies: dict[str, int]) -> dict[str, object]:
    checkers = {
        name: {"status": "invalid" if n else "valid", "anomaly_count": n}
        for name, n in {"aborted_read": 0, "lost_write": 0, **anomalies}.items()
    }
    return {
        "status": status,
        "checkers": checkers,
        "stats": {"transactions": {"committed": 200, "aborted": 10}},
        "run": {"workload_started_ns": 100 * SEC, "ended_ns": 140 * SEC},
        "faults": [{"kind": "delay"}] * 40,  # fault-log records: one per frame delayed
    }


def junit_failure(night: Path, r: RunRow) -> ET.Element:
    """The JUnit failure of the one run ``r``, written to ``night``."""
    write_junit([r], night / "junit.xml", 1.0)
    failure = ET.parse(night / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None
    return failure


def summary_page(night: Path, r: RunRow, totals: dict[str, int]) -> str:
    """summary.html of a night of the one run ``r`` with ``totals``."""
    write_summary_html(
        {"night": "n", "started": "s", "wall_s": 1.0, "totals": totals}, [r], night / "s.html"
    )
    return (night / "s.html").read_text()


def test_rows_from_run_directories_and_junit(tmp_path: Path) -> None:
    night = tmp_path / "20261125-200000"
    valid, invalid, failed = row(1, exit_code=0), row(2, exit_code=1), row(3, exit_code=2)
    write_run(night, valid, verdict("valid", {}))
    write_run(night, invalid, verdict("invalid", {"aborted_read": 3}))
    write_run(night, failed, None)
    rows = [fill_from_run_dir(r, night) for r in (valid, invalid, failed)]

    assert (valid.verdict, valid.passed, valid.anomalies) == ("valid", True, {})
    assert (valid.committed, valid.throughput) == (200, 5.0)
    assert valid.faults == {"delay": 2, "kill": 1}
    assert valid.report == "runs/001/report.html"
    assert (invalid.verdict, invalid.passed) == ("invalid", False)
    assert invalid.anomalies == {"aborted_read": 3}
    assert (failed.verdict, failed.failure) == (HARNESS_FAILED, "the cluster did not start")
    assert RunRow.from_json(json.loads(json.dumps(valid.to_json()))) == valid

    write_junit(rows, night / "junit.xml", 99.0)
    suite = ET.parse(night / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    # one stable name per scenario (the seed is a property): CI systems track it night by night
    assert [c.get("name") for c in cases] == ["smoke", "smoke (run 2)", "smoke (run 3)"]
    assert {c.get("classname") for c in cases} == {"txnchaos.nightly"}
    props = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    assert props["seed"] == "11" and props["scenario_file"] == "scenarios/smoke.yaml"
    assert props["faults.scheduled"] == "delay=2, kill=1"
    assert props["repeat"] == "txnchaos run scenarios/smoke.yaml --seed 11"
    assert props["cluster.flavour"] == "unknown" and props["transaction.version"] == "unknown"
    assert cases[0].get("timestamp") == "2026-11-25T20:00:00+00:00"
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "unexpected_verdict"
    assert (failure.get("message") or "") == (
        "verdict invalid, expected valid: aborted_read=3; "
        "repeat: txnchaos run scenarios/smoke.yaml --seed 12"
    )
    assert "txnchaos run scenarios/smoke.yaml --seed 12" in (failure.text or "")
    error = cases[2].find("error")
    assert error is not None and "the cluster did not start" in (error.text or "")


def test_a_run_that_expects_invalid_passes_when_invalid(tmp_path: Path) -> None:
    r = row(1, exit_code=1, expected="invalid")
    write_run(tmp_path, r, verdict("invalid", {"hanging_transactions": 1}))
    assert fill_from_run_dir(r, tmp_path).passed


def test_trend_reads_every_night_and_skips_broken_ones(tmp_path: Path) -> None:
    for name, rows in (
        ("20261123-020000", [row(1, verdict="valid", throughput=50.0)]),
        ("20261124-020000", [row(1, verdict="invalid", anomalies={"lost_write": 2})]),
    ):
        night = tmp_path / name
        night.mkdir()
        summary = {"started": name, "night": name, "runs": [r.to_json() for r in rows]}
        (night / "summary.json").write_text(json.dumps(summary))
        write_summary_html(
            {
                **summary,
                "wall_s": 1.0,
                "seed_base": 1,
                "repeat": "txnchaos nightly",
                "stopped": None,
                "totals": {"runs": 1, "passed": 1, "invalid": 0, "harness_failed": 0},
            },
            rows,
            night / "summary.html",
        )
    (tmp_path / "20261125-020000").mkdir()
    (tmp_path / "20261125-020000" / "summary.json").write_text("{not json")
    page = write_trend(tmp_path).read_text()
    assert page.index("20261123-020000") < page.index("20261124-020000")
    assert "20261125-020000" not in page
    assert "lost_write: 2" in page and "50.0" in page
    assert 'href="20261123-020000/summary.html"' in page


def test_a_run_that_cannot_be_shrunk_says_why_and_keeps_its_verdict(tmp_path: Path) -> None:
    """The shrinker refuses a run without its scenario: the row says so, nothing else moves."""
    r = row(1, exit_code=1)
    write_run(tmp_path, r, verdict("invalid", {"aborted_read": 3}))
    fill_from_run_dir(r, tmp_path)
    assert wanted(r)
    shrink_row(r, tmp_path, budget_s=60.0, judge=RunJudge("reference"))
    assert r.verdict == "invalid" and r.shrunk is None and r.shrink_reruns is None
    assert r.shrink_note is not None and "no scenario.yaml" in r.shrink_note
    assert r.shrink_log is not None and (tmp_path / r.shrink_log).is_file()
    assert not wanted(row(2, verdict="invalid", expected="invalid"))
    assert not wanted(row(3, verdict="valid"))


def test_a_shrunk_run_links_its_minimal_scenario(tmp_path: Path) -> None:
    shrunk = "runs/001/shrunk.yaml"
    r = row(1, verdict="invalid", anomalies={"aborted_read": 3}, exit_code=1)
    r.shrunk, r.shrink_reruns, r.shrink_note = shrunk, 4, "minimal scenario in 4 re-runs: ..."
    failure = junit_failure(tmp_path, r)
    assert (failure.get("message") or "").endswith(f"; minimal scenario {shrunk} (4 re-runs)")
    assert f"txnchaos run {shrunk}" in (failure.text or "")
    page = summary_page(tmp_path, r, {})
    assert f'<a href="{shrunk}">minimal scenario</a> (4 re-runs)' in page


def test_a_valid_run_whose_nemesis_failed_is_marked_and_fails_in_junit(tmp_path: Path) -> None:
    r = row(1, exit_code=0)
    errors = [
        {"action": 1, "kind": "restart", "step": "apply", "at": 4.0, "error": "timed out"},
        {"action": 2, "kind": "pause", "step": "apply", "at": 9.5, "error": "node 2 is down"},
    ]
    nemesis = {"scheduled": 3, "applied": 1, "failed": 2, "not_reached": 0, "errors": errors}
    write_run(tmp_path, r, {**verdict("valid", {}), "nemesis": nemesis})
    fill_from_run_dir(r, tmp_path)
    assert (r.verdict, r.outcome, r.passed) == ("valid", "valid, nemesis errors 2", False)
    assert r.nemesis == "3 fault(s) scheduled, 1 applied, 2 failed, 2 errors"
    assert RunRow.from_json(json.loads(json.dumps(r.to_json()))) == r

    write_junit([r], tmp_path / "junit.xml", 1.0)
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure.get("type") == "nemesis"
    assert (failure.get("message") or "").startswith("nemesis errors 2: the faults were not")
    assert "action 2 pause: apply failed (due at 9.5 s): node 2 is down" in (failure.text or "")
    page = summary_page(tmp_path, r, {"nemesis_failed": 1})
    assert "valid, nemesis errors 2" in page and "1 with nemesis errors" in page
    assert "node 2 is down" in page


CRASH = {
    "kind": "client_crash",
    "process": "writer-1",
    "user_kind": "transactional_producer",
    "at_s": 15.1,
    "library": "librdkafka",
    "library_version": "2.16.0",
    "signal": "SIGABRT",
    "exit_code": -6,
    "message": "rdkafka_txnmgr.c:1007: rd_kafka_txn_handle_AddPartitionsToTxn: "
    "Assertion `rk->rk_eos.txn_req_cnt > 0' failed.",
    "in_flight": [{"process": "writer-1", "type": "begin", "txn": 26}],
    "faults_active": [],
    "faults_before": [{"kind": "drop_response", "target": "client->n1001", "applied_at_s": 4.5}],
}


def test_a_client_crash_is_its_own_class_and_junit_failure(tmp_path: Path) -> None:
    """A valid verdict beside a crashed client does not pass: the row, the summary and the
    JUnit failure (type client_crash) say what crashed and how to repeat it."""
    r = row(1, exit_code=1)
    write_run(tmp_path, r, {**verdict("valid", {}), "findings": [CRASH]})
    fill_from_run_dir(r, tmp_path)
    assert (r.verdict, r.passed, r.status_class) == ("valid", False, "client_crash")
    assert r.outcome == "valid, client crash"
    (line,) = r.findings
    assert line.startswith("client crash: writer-1 (transactional_producer, librdkafka 2.16.0)")
    assert "Assertion `rk->rk_eos.txn_req_cnt > 0' failed." in line
    failure = junit_failure(tmp_path, r)
    assert failure.get("type") == "client_crash"
    message = failure.get("message") or ""
    assert message.startswith("client crash: writer-1") and "SIGABRT" in message
    assert message.endswith("; repeat: txnchaos run scenarios/smoke.yaml --seed 11")
    page = summary_page(tmp_path, r, {"client_crash": 1})
    assert "1 with a client crash" in page and 'class="client_crash"' in page


HANG = {
    "kind": "client_hang",
    "process": "copier-0",
    "user_kind": "eos_copier",
    "at_s": 38.2,
    "call": "send_offsets_to_transaction",
    "timeout_s": 30.0,
    "waited_s": 45.0,
    "type": "send_offsets",
    "txn": 12,
    "library": "librdkafka",
    "library_version": "2.16.0",
    "issue": "librdkafka#5456",
    "faults_active": [{"kind": "restart", "target": "node 2", "applied_at_s": 36.0}],
    "faults_before": [],
}


def test_a_client_hang_is_its_own_class_and_junit_failure(tmp_path: Path) -> None:
    """A valid verdict beside a client library call that never returned does not pass, as
    beside a crash: the row, the summary and the JUnit failure (type client_hang) say which
    call hung, where, and how to repeat it."""
    r = row(1, exit_code=1)
    write_run(tmp_path, r, {**verdict("valid", {}), "findings": [HANG]})
    fill_from_run_dir(r, tmp_path)
    assert (r.verdict, r.passed, r.status_class) == ("valid", False, "client_hang")
    assert r.outcome == "valid, client hang"
    (line,) = r.findings
    assert line.startswith("client hang: copier-0 (eos_copier, librdkafka 2.16.0) at +38.2 s: ")
    assert "send_offsets_to_transaction(timeout=30 s) never returned (librdkafka#5456)" in line
    assert "given up after 45.0 s: send_offsets txn 12 recorded info" in line
    assert "faults active: restart on node 2 (+36.0..end s)" in line
    failure = junit_failure(tmp_path, r)
    assert failure.get("type") == "client_hang"
    assert (failure.get("message") or "").startswith("client hang: copier-0")
    page = summary_page(tmp_path, r, {"client_hang": 1})
    assert "1 with a client hang" in page and 'class="client_hang"' in page


NODE_ERROR = {
    "kind": "node_error",
    "node": "node-2",
    "nodes": ["node-2"],
    "exception": "txnchaos.cluster.protocol.record_batch.CorruptBatch",
    "detail": "crc mismatch",
    "where": "storage/segment.py:107 in iter_batches",
    "message": "cannot open events-1",
    "at_s": 31.5,
    "count": 2,
    "faults_active": [],
    "faults_before": [],
}


def test_a_node_error_comes_before_a_client_crash_and_is_its_own_junit_failure(
    tmp_path: Path,
) -> None:
    """An exception that escaped a node is the cluster's bug: its own class, more serious
    than a client's crash, named in the row, the JUnit failure and the summary."""
    r = row(1, exit_code=1)
    write_run(tmp_path, r, {**verdict("valid", {}), "findings": [CRASH, NODE_ERROR]})
    fill_from_run_dir(r, tmp_path)
    assert r.problems == ["node_error", "client_crash"] and r.status_class == "node_error"
    assert r.outcome == "valid, node error, client crash"
    (line,) = r.findings_of("node_error")
    assert line.startswith("node error: node-2 at +31.5 s (2 times): ")
    assert "CorruptBatch: crc mismatch in storage/segment.py:107" in line
    failure = junit_failure(tmp_path, r)
    assert failure.get("type") == "node_error"
    assert (failure.get("message") or "").startswith("node error: node-2")
    page = summary_page(tmp_path, r, {"node_error": 1})
    assert "1 with a node error" in page and '<span class="node_error">node error: ' in page


def test_a_run_whose_faults_were_all_missed_is_no_chaos(tmp_path: Path) -> None:
    r = row(1, exit_code=0)
    error = {"action": 0, "kind": "pause", "step": "apply", "at": 4.0, "error": "node is down"}
    nemesis = {"scheduled": 1, "applied": 0, "failed": 1, "not_reached": 0, "errors": [error]}
    write_run(tmp_path, r, {**verdict("valid", {}), "nemesis": nemesis})
    fill_from_run_dir(r, tmp_path)
    assert r.no_chaos == "no fault was applied (1 scheduled, 1 failed)"
    assert (r.passed, r.status_class, r.outcome) == (
        False,
        "no_chaos",
        "valid, no chaos, nemesis errors 1",
    )
    failure = junit_failure(tmp_path, r)
    assert failure.get("type") == "no_chaos"
    assert (failure.get("message") or "").startswith("no chaos: no fault was applied")
    # a scenario without a nemesis asks for no chaos and is not judged on it
    quiet = row(2, exit_code=0)
    nothing = {"scheduled": 0, "applied": 0, "failed": 0, "not_reached": 0, "errors": []}
    write_run(tmp_path, quiet, {**verdict("valid", {}), "nemesis": nothing})
    assert fill_from_run_dir(quiet, tmp_path).passed


def test_trend_draws_outcomes_anomalies_and_throughput(tmp_path: Path) -> None:
    nights = {
        "20261123-020000": [row(1, verdict="valid", throughput=50.0)],
        "20261124-020000": [
            row(1, verdict="valid", throughput=40.0, findings=["client crash: w"]),
            row(2, verdict="invalid", anomalies={"lost_write": 2}, throughput=30.0),
        ],
    }
    for name, rows in nights.items():
        (tmp_path / name).mkdir()
        summary = {"started": name, "night": name, "runs": [r.to_json() for r in rows]}
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
    page = write_trend(tmp_path).read_text()
    assert page.count("<svg") == 3
    for title in ("Runs by outcome", "Anomalies by checker", "Committed transactions per second"):
        assert title in page
    assert ">client crash<" in page and ">lost_write<" in page  # legends, text kept as text
    second = page[page.index('href="20261124-020000/summary.html"') :]
    assert '<td class="num client_crash">1</td>' in second
