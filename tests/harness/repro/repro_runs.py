"""Running a catalogue entry as a user does (`txnchaos repro NAME`, a subprocess: real
nodes, real confluent-kafka clients, the real analysis) and holding each configuration's
verdict to the entry's prediction. `repro` judges these short runs with the reference
checkers; each run is judged again with PySpark, and the two verdicts must be the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.analysis.engine_support import assert_same_verdict
from txnchaos.analysis.analyze import analyze
from txnchaos.harness.repro.catalogue import SHIPPED, load_catalogue

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_entry(
    name: str, out: Path, config: str | None = None, kafka_version: str | None = None
) -> dict[str, dict[str, Any]]:
    """Runs ``txnchaos repro NAME`` (every configuration on the project's cluster, or
    ``config``, or those on Apache Kafka ``kafka_version``), asserts it exited 0 (every
    verdict as predicted), and returns the outcomes by configuration."""
    command = ["repro", name, "--out", str(out)]
    if config is not None:
        command += ["--config", config]
    elif kafka_version is not None:
        command += ["--kafka-version", kafka_version]
    else:
        command += ["--cluster", "txnchaos"]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.harness.cli", *command],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads((out / "repro.json").read_text())
    return {o["configuration"]: o for o in result["outcomes"]}


def assert_as_predicted(
    name: str,
    out: Path,
    outcomes: dict[str, dict[str, Any]],
    spark: SparkSession,
    kafka_version: str | None = None,
) -> None:
    """Every configuration of the entry on the project's cluster (or on Apache Kafka
    ``kafka_version``) ran; the bug ones are invalid with (at least) the predicted checkers
    flagging, the defended ones valid; each left its verdict, and Spark judges each run as
    the reference did."""

    entry = load_catalogue(SHIPPED)[name]
    configurations = {
        n: c for n, c in entry.spec.configurations.items() if c.kafka_version == kafka_version
    }
    assert set(outcomes) == set(configurations)
    if kafka_version is None:
        verdicts = {c.expect.verdict for c in configurations.values()}
        assert verdicts == {"invalid", "valid"}, "an entry must fail somewhere and hold somewhere"
    for config_name, config in configurations.items():
        o = outcomes[config_name]
        assert o["matched"] and o["verdict"] == config.expect.verdict, o
        assert set(config.expect.anomalies) <= set(o["anomalies"]), o
        if config.expect.verdict == "valid":
            assert not o["anomalies"], o
        assert_engines_agree(out / config_name, spark)


def assert_engines_agree(run_dir: Path, spark: SparkSession) -> None:
    """The run was judged by the reference checkers, and Spark's verdict is the same."""
    from txnchaos.analysis.pipeline import analyze as spark_analyze

    assert json.loads((run_dir / "verdict.json").read_text())["engine"] == "reference"
    reference = analyze(run_dir, engine="reference", write=False)
    assert_same_verdict(spark_analyze(run_dir, spark=spark, write=False), reference)


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
#: Entries whose every configuration is an Apache Kafka release: the suite runs two reported
#: bugs on their releases (test_repro_kafka_releases.py); these run in bench/detection.py and
#: the nightly job (docs/reproducing-bugs.md), as a release takes minutes to run on CI.
ON_RELEASES_ONLY = ["coordinator-reload-loses-pending-markers"]
#: Entries too long for the suite's per-test time on any cluster (fence-at-last-epoch-overflows
#: first makes 32,766 InitProducerId calls): bench/detection.py and the nightly job run them;
#: the bug switch each needs has its unit test (tests/cluster/test_bug_switches.py).
NIGHTLY_ONLY = ["fence-at-last-epoch-overflows"]
