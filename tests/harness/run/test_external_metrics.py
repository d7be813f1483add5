"""An external cluster's metrics URLs reach the run: from the scenario (``cluster.metrics``)
or the command line (``--metrics-url NODE=URL``), scraped during the run, and judged by the
metrics checker (not "unknown", as when no URL is known)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.conftest import start_cluster
from txnchaos.harness.launch.metrics_urls import parse_metrics_url
from txnchaos.harness.run.scenario import ScenarioError, parse_scenario
from txnchaos.jobs.cli import main

ROOT = Path(__file__).resolve().parents[3]
USERS = {
    "topics": [{"name": "m-events", "partitions": 2}],
    "users": [
        {"kind": "transactional_producer", "topics": ["m-events"], "rate": 5},
        {"kind": "read_committed_consumer", "topics": ["m-events"], "mode": "assign"},
    ],
}
SCENARIO = f"""\
name: external-metrics
seed: 3
duration: 6
cluster: {{launcher: external}}
workload: {json.dumps(USERS)}
nemesis: {{actions: [{{at: 1, kind: delay, duration: 2, rule: {{link: "client->*", ms: 20}}}}]}}
final: {{quiescence_timeout: 30, read_timeout: 30}}
"""


def test_scenario_takes_metrics_urls_of_an_external_cluster() -> None:
    base = {"name": "t", "workload": USERS}
    ok = parse_scenario(
        {**base, "cluster": {"launcher": "external", "metrics": {1: "http://h:9/m"}}}
    )
    assert ok.cluster.metrics == {1: "http://h:9/m"}
    with pytest.raises(ScenarioError, match="only an external cluster's"):
        parse_scenario({**base, "cluster": {"metrics": {1: "http://h:9/m"}}})
    with pytest.raises(ScenarioError, match="not an http:// or https:// URL"):
        parse_scenario({**base, "cluster": {"launcher": "external", "metrics": {1: "h:9"}}})


def test_metrics_url_option_is_checked_before_anything_starts(tmp_path: Path) -> None:
    assert parse_metrics_url("2=https://h:1/metrics") == (2, "https://h:1/metrics")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    runner = CliRunner()
    cases = {
        ("--metrics-url", "1:http://h/m"): "expected NODE=URL",
        ("--metrics-url", "1=ftp://h/m"): "not an http:// or https:// URL",
        ("--metrics-url", "1=http://h/a", "--metrics-url", "1=http://h/b"): "given twice",
        ("--launcher", "local", "--metrics-url", "1=http://h/m"): "for an external cluster",
    }
    for args, message in cases.items():
        result = runner.invoke(
            main,
            [
                "run",
                str(scenario),
                "--bootstrap",
                "127.0.0.1:1",
                *args,
                "--out",
                str(tmp_path / "r"),
            ],
        )
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
        assert not (tmp_path / "r").exists()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_external_run_scrapes_and_judges_the_given_metrics(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "cluster", brokers=1)
    try:
        state = cluster.state()
        urls = [f"{n['id']}=http://{n['host']}:{n['metrics_port']}/metrics" for n in state["nodes"]]
        scenario = tmp_path / "s.yaml"
        scenario.write_text(SCENARIO)
        out = tmp_path / "run"
        args = ["run", str(scenario), "--bootstrap", state["bootstrap"], "--out", str(out)]
        args += ["--engine", "reference"]  # the scraping, not the engine, is under test here
        for url in urls:
            args += ["--metrics-url", url]
        proc = subprocess.run(
            [sys.executable, "-m", "txnchaos.jobs.cli", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=380,
        )
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    finally:
        cluster.down()
    info = json.loads((out / "run.json").read_text())
    assert info["cluster_kind"] == "external" and info["metrics_supported"] is True
    nodes = set(pq.read_table(out / "metrics.parquet", columns=["node"])["node"].to_pylist())
    assert {f"node-{n['id']}" for n in state["nodes"]} <= nodes
    verdict = json.loads((out / "verdict.json").read_text())
    checker = verdict["checkers"]["metrics"]
    assert checker["status"] != "unknown", checker
