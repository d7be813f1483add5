"""Spark is the judge: ``txnchaos analyze`` names its Spark application after the run, takes
``--conf K=V`` settings (a bad one is refused before anything starts) and prints and records
the master and application id; a judge warmed while a run goes on starts its session then, and
judges every later run on that same session. Each case in a process of its own: a session is
per process, and the suite's shared one must not be replaced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from txnchaos_testing.synthetic import Synth, SynthConfig

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def txnchaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def test_analyze_names_its_application_takes_conf_and_records_master_and_id(
    tmp_path: Path,
) -> None:
    run_dir = Synth(SynthConfig(txns_per_writer=3)).build().write(tmp_path / "run-7")
    proc = txnchaos("analyze", str(run_dir), "--conf", "spark.txnchaos.probe=42")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spark = json.loads((run_dir / "verdict.json").read_text())["spark"]
    assert spark["app_name"] == "txnchaos analyze run-7"
    assert spark["master"] == "local[2]" and spark["app_id"].startswith("local-")
    assert spark["conf"] == {"spark.txnchaos.probe": "42"}  # as the session holds it
    assert spark["session"] == "started for this analysis" and spark["session_start_s"] > 0
    line = proc.stdout.splitlines()[1]
    assert line.strip().startswith(f"judged by PySpark {spark['version']} on local[2]"), line
    assert spark["app_id"] in line and "s of it starting the Spark session" in line


@pytest.mark.parametrize("bad", ["spark.sql.shuffle.partitions", "=3", "not a key=1", "spark.x"])
def test_a_bad_conf_is_refused_naming_it(tmp_path: Path, bad: str) -> None:
    run_dir = Synth(SynthConfig(txns_per_writer=2)).build().write(tmp_path)
    proc = txnchaos("analyze", str(run_dir), "--conf", bad)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--conf" in line and repr(bad) in line and "KEY=VALUE" in line, line
    assert not (run_dir / "verdict.json").exists()


WARMED = """
import json, sys, time
from txnchaos.analysis.analyze import RunJudge
judge = RunJudge(app_name="txnchaos nightly")
judge.warm()  # as the orchestrator does when the workload starts
time.sleep(1)
codes = [judge.judge(d) for d in sys.argv[1:]]
print(json.dumps(codes))
"""


# two Spark sessions in a child process: 106 s at load 8-14, over 300 s at load 10-21
@pytest.mark.timeout(900)
def test_a_warmed_judge_starts_its_session_ahead_and_reuses_it(tmp_path: Path) -> None:
    first = Synth(SynthConfig(txns_per_writer=2)).build().write(tmp_path / "a")
    synth = Synth(SynthConfig(seed=5, txns_per_writer=2)).build()
    synth.inject_lost_write()
    second = synth.write(tmp_path / "b")
    proc = subprocess.run(
        [sys.executable, "-c", WARMED, str(first), str(second)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == [0, 1]
    a, b = (json.loads((d / "verdict.json").read_text())["spark"] for d in (first, second))
    assert a["session"] == "started during the run" and a["session_wait_s"] >= 0
    assert b["session"] == "reused" and b["session_start_s"] == a["session_start_s"]
    assert a["app_id"] == b["app_id"] and a["app_name"] == "txnchaos nightly"
    assert "warmed up in" in proc.stdout and "while the run went on" in proc.stdout
    assert "was up already" in proc.stdout
