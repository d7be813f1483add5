"""Running a catalogue entry as a user does (`txnchaos repro NAME`, a subprocess: real
nodes, real confluent-kafka clients, the real analysis) and holding each configuration's
verdict to the entry's prediction. `repro` judges every configuration's run with PySpark (one
Spark session for the entry), and each verdict.json is held equal to the plain rules'
verdict of the same run (the reference engine: no JVM in the test process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.analysis.engine_support import assert_spark_wrote_the_rules_verdict
from txnchaos.analysis.analyze import analyze
from txnchaos.harness.repro.catalogue import SHIPPED, load_catalogue


def run_entry(name: str, out: Path, config: str | None = None) -> dict[str, dict[str, Any]]:
    """Runs ``txnchaos repro NAME`` (every configuration, or ``config``), asserts it exited 0
    (every verdict as predicted), and returns the outcomes by configuration."""
    command = ["repro", name, "--out", str(out)]
    if config is not None:
        command += ["--config", config]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *command],
        capture_output=True,
        text=True,
        timeout=1800,  # a loaded machine: each configuration's run and its Spark judging
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads((out / "repro.json").read_text())
    return {o["configuration"]: o for o in result["outcomes"]}


def assert_as_predicted(name: str, out: Path, outcomes: dict[str, dict[str, Any]]) -> None:
    """Every configuration of the entry ran; the bug ones are invalid with (at least) the
    predicted checkers flagging, the defended ones valid; each left its verdict, written by
    PySpark (one session for the entry's runs) and equal to the plain rules' verdict."""

    entry = load_catalogue(SHIPPED)[name]
    assert set(outcomes) == set(entry.spec.configurations)
    verdicts = {c.expect.verdict for c in entry.spec.configurations.values()}
    assert verdicts == {"invalid", "valid"}, "an entry must fail somewhere and hold somewhere"
    for config_name, config in entry.spec.configurations.items():
        o = outcomes[config_name]
        assert o["matched"] and o["verdict"] == config.expect.verdict, o
        assert set(config.expect.anomalies) <= set(o["anomalies"]), o
        if config.expect.verdict == "valid":
            assert not o["anomalies"], o
        assert_engines_agree(out / config_name)
    apps = {json.loads((out / c / "verdict.json").read_text())["spark"]["app_id"] for c in outcomes}
    assert len(apps) == 1, apps  # one Spark session judged every configuration


def assert_engines_agree(run_dir: Path) -> None:
    """The run was judged by PySpark, and the plain rules give the same verdict."""
    written = json.loads((run_dir / "verdict.json").read_text())
    assert_spark_wrote_the_rules_verdict(written, analyze(run_dir, engine="reference", write=False))


#: Entries the suite runs whole, every configuration, by the kind of bug (one test file each,
#: so the two test workers share them out). The three late-request entries of KIP-890 run
#: together instead (test_late_request_cases.py).
ISOLATION = ["lso-ignores-open-transactions", "fetch-ignores-aborted-index"]
HANGING = [
    "producer-state-expiry",
    "transaction-timeout-never-fires",
    "coordinator-skips-pending-markers",
    "write-before-add-partitions",
]
TWO_PHASE = ["prepared-transaction-timed-out", "prepared-transaction-aborted-by-init"]
