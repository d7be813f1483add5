"""Load tests as locust users expect: ``--csv PREFIX`` and ``--html FILE`` write locust's own
files, STOP in the web UI ends the run as interrupted (recorded in run.json, judged on what
ran) rather than as a complete run, and the report charts the users and requests per second."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .test_web import Output, get, txnchaos

SCENARIO = """\
name: load-reports
seed: 5
duration: {duration}
cluster: {{launcher: local, brokers: 1, coordinators: 0, proxied: false}}
workload:
  topics:
    - {{name: events, partitions: 2}}
  users:
    - {{kind: transactional_producer, name: writer, count: 2, topics: [events],
       records_per_txn: 3, abort_probability: 0.3, flush_before_abort_probability: 0,
       rate: 10}}
final: {{quiescence_timeout: 30, read_timeout: 60}}
expect: {{verdict: valid}}
"""

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:  # a failure above: let the run stop its cluster first
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_csv_and_html_are_locusts_own(tmp_path: Path) -> None:
    scenario = tmp_path / "load.yaml"
    scenario.write_text(SCENARIO.format(duration=8))
    out, prefix, html = tmp_path / "run", tmp_path / "csv" / "load", tmp_path / "load.html"
    proc = txnchaos(
        "run", str(scenario), "--out", str(out), "--csv", str(prefix), "--html", str(html)
    )
    output = Output(proc)
    code = proc.wait(timeout=540)
    assert code == 0, output.text()

    stats = {(r["Type"], r["Name"]): r for r in _rows(Path(f"{prefix}_stats.csv"))}
    assert int(stats[("txn", "commit")]["Request Count"]) > 0
    assert int(stats[("", "Aggregated")]["Request Count"]) > 0
    # the aborts the scenario chose purge unsent records: counted apart, never as failures
    purged = stats[("txn", "send (purged by a deliberate abort)")]
    assert int(purged["Request Count"]) > 0 and int(purged["Failure Count"]) == 0
    assert int(stats[("txn", "send")]["Failure Count"]) == 0
    history = _rows(Path(f"{prefix}_stats_history.csv"))
    assert len(history) >= 3 and {r["Name"] for r in history} == {"Aggregated"}
    assert max(int(r["User Count"]) for r in history) == 2
    assert Path(f"{prefix}_failures.csv").is_file() and Path(f"{prefix}_exceptions.csv").is_file()
    page = html.read_text()
    assert "<html" in page.lower() and "Locust" in page and '"commit"' in page

    report = (out / "report.html").read_text()
    assert 'id="chart-users"' in report and "Users and requests per second" in report
    assert "no locust statistics recorded" not in report


def test_stop_in_the_web_ui_ends_the_run_as_interrupted(tmp_path: Path) -> None:
    scenario = tmp_path / "load.yaml"
    scenario.write_text(SCENARIO.format(duration=300))
    out = tmp_path / "run"
    # judged by the plain rules: what is tested is the stop, not Spark (whose start took
    # 5 minutes at load 28)
    proc = txnchaos("run", str(scenario), "--out", str(out), "--web", "--engine", "reference")
    output = Output(proc)
    try:
        assert output.url_printed.wait(timeout=180)
        url = output.url
        assert url is not None, "".join(output.lines)
        stats: dict[str, Any] = {"stats": []}
        while not any(s["name"] == "commit" and s["num_requests"] for s in stats["stats"]):
            assert proc.poll() is None, output.text()
            stats = json.loads(get(url + "/stats/requests")[1])
            time.sleep(0.2)
        stopped = time.time()
        request = urllib.request.Request(url + "/stop", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status == 200
        code = proc.wait(timeout=600)
    finally:
        _stop(proc)
    text = output.text()
    assert code == 0, text  # judged on what ran: valid
    info = json.loads((out / "run.json").read_text())
    assert info["interrupted"] is True and info["interrupted_by"] == "the web UI's STOP"
    assert info["complete"] is True  # the final phase ran: the verdict stands on it
    assert 0 < info["workload_ran_s"] < 300  # stopped, not the scenario's 300 s
    assert info["workload_stopped_ns"] / 1e9 > stopped  # by the STOP
    assert "stopped the users after" in text and "judged on what ran" in text
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "valid"
    report = (out / "report.html").read_text()
    assert "the web UI&#39;s STOP after" in report and "judged on what ran" in report
