"""``txnchaos nightly`` end to end: real clusters, real runs, real verdicts. Two tiny
scenarios, one healthy and one on a cluster with a bug switch on (read_committed fetches
ignore the aborted-transaction index), so the night has a valid run and an invalid
one: exit code 1, both run directories kept, and a summary, junit file and trend page
that say which run failed and how to repeat it.  The invalid run is shrunk with a budget
that leaves room for the one re-run that shows the anomaly comes back: its row links the
(not smaller) minimal scenario, and the exit code is still 1. Every run of the night, the
re-run too, is judged by PySpark in the nightly process, one Spark session for all of them,
and each verdict equals the plain rules' verdict of the same run."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.analysis.engine_support import assert_spark_wrote_the_rules_verdict
from txnchaos.analysis.analyze import analyze

# a night of two runs, a re-run and their Spark verdicts: 150-235 s on a busy 2-core machine
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SCENARIO = """name: {name}
duration: 6
cluster:
  brokers: 1
  proxied: false
  settings: {settings}
workload:
  topics: [{{name: events, partitions: 2}}]
  users:
    - {{kind: transactional_producer, topics: [events], records_per_txn: 3,
       abort_probability: 0.5, transaction_timeout_ms: 10000, rate: 10}}
    - {{kind: read_committed_consumer, topics: [events], group_id: readers}}
final: {{quiescence_timeout: 30, read_timeout: 60}}
"""


def test_a_night_with_a_valid_and_an_invalid_run(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "healthy.yaml").write_text(SCENARIO.format(name="healthy", settings="{}"))
    (scenarios / "buggy.yaml").write_text(
        SCENARIO.format(name="buggy", settings="{txnchaos.bug.fetch.ignores.aborted.index: true}")
    )
    root = tmp_path / "nightly"
    args = ["nightly", str(scenarios), "--runs", "2", "--out", str(root), "--seed-base", "40"]
    args += ["--shrink-budget", "1s"]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (night,) = [p for p in root.iterdir() if p.is_dir()]
    summary = json.loads((night / "summary.json").read_text())
    runs = {r["scenario"]: r for r in summary["runs"]}
    assert [(r["scenario"], r["seed"]) for r in summary["runs"]] == [("buggy", 40), ("healthy", 41)]
    assert runs["healthy"]["verdict"] == "valid" and runs["healthy"]["passed"]
    assert runs["buggy"]["verdict"] == "invalid" and not runs["buggy"]["passed"]
    assert runs["buggy"]["anomalies"].get("aborted_read", 0) > 0
    assert runs["healthy"]["committed"] > 0
    for r in runs.values():
        assert (night / r["run_dir"] / "verdict.json").is_file()
        assert (night / r["report"]).is_file()
        assert f"--seed {r['seed']}" in r["command"]
    totals = {"runs": 2, "passed": 1, "invalid": 1, "harness_failed": 0, "nemesis_failed": 0}
    totals |= {"node_error": 0, "client_crash": 0, "client_hang": 0, "no_chaos": 0}
    assert summary["totals"] == totals
    assert "--seed-base 40" in summary["repeat"]

    suite = ET.parse(night / "junit.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("2", "1")
    (failed,) = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "buggy"  # the seed is a property, not part of the name
    seed = [p for p in failed.iter("property") if p.get("name") == "seed"]
    assert [p.get("value") for p in seed] == ["40"]
    assert "aborted_read" in (failed.find("failure").get("message") or "")  # type: ignore[union-attr]

    assert 'href="runs/001-buggy-seed40/report.html"' in (night / "summary.html").read_text()
    assert f'href="{night.name}/summary.html"' in (root / "trend.html").read_text()
    assert "buggy seed 40" in proc.stdout and "invalid" in proc.stdout

    shrunk = "runs/001-buggy-seed40/shrunk.yaml"
    assert (runs["buggy"]["shrunk"], runs["buggy"]["shrink_reruns"]) == (shrunk, 1)
    assert "nothing smaller fails" in runs["buggy"]["shrink_note"]
    assert "expect:" in (night / shrunk).read_text()
    assert runs["healthy"]["shrunk"] is None and runs["healthy"]["shrink_note"] is None
    assert f'href="{shrunk}"' in (night / "summary.html").read_text()
    message = failed.find("failure").get("message") or ""  # type: ignore[union-attr]
    assert f"minimal scenario {shrunk} (1 re-run)" in message

    # judged by PySpark in this process (one session for the night), as the plain rules judge
    rerun = night / "runs/001-buggy-seed40/shrink/attempt-001"
    apps = set()
    for run_dir in [*(night / r["run_dir"] for r in runs.values()), rerun]:
        written = json.loads((run_dir / "verdict.json").read_text())
        reference = analyze(run_dir, engine="reference", write=False)
        assert_spark_wrote_the_rules_verdict(written, reference)
        apps.add(written["spark"]["app_id"])
        assert written["spark"]["app_name"] == "txnchaos nightly"
    assert len(apps) == 1, apps
    for r in runs.values():  # what was judged: our cluster (its version once run.json has it)
        assert r["engine"] == "spark" and r["cluster"]["flavour"] == "txnchaos", r
    assert "judged by PySpark" in (night / runs["healthy"]["log"]).read_text()
    assert "; spark</td>" in (night / "summary.html").read_text()
