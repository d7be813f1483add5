"""Running a catalogue entry as a user does (`txnchaos repro NAME`, a subprocess: real
nodes, real confluent-kafka clients, the real analysis) and holding each configuration's
verdict to the entry's prediction.

What judges them, with the suite's time in mind (a Spark session costs a JVM and its warm-up):
one entry runs exactly as a user's `txnchaos repro` does, judged by PySpark in the repro
process (one session for every configuration), each verdict.json held equal to the plain
rules' verdict; the others run with ``--engine reference`` (no JVM in the child) and a few
representative ones are judged again by PySpark in the test process, on the suite's one shared
session (the ``spark`` fixture), and held equal. ``TXNCHAOS_TEST_SPARK=all`` (the nightly CI
job) holds every catalogue run to PySpark's verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.analysis.engine_support import assert_same_verdict, assert_spark_wrote_the_rules_verdict
from txnchaos.analysis.analyze import analyze
from txnchaos.harness.repro.catalogue import SHIPPED, load_catalogue

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: the entry whose `txnchaos repro` judges with its default engine, PySpark, in the child
SPARK_IN_THE_COMMAND = "lso-ignores-open-transactions"
#: entries judged again by PySpark in the test process, on the shared session: one of each
#: test file's family, the case the default suite keeps (tests/selection.nightly_except)
SPARK_IN_THE_SUITE = {
    "producer-state-expiry",
    "prepared-transaction-aborted-by-init",
    "late-requests-tv0",
    "produce-after-abort-3.5.2",
}


def every_run_by_spark() -> bool:
    """Whether every catalogue run is held to PySpark's verdict (``TXNCHAOS_TEST_SPARK=all``)."""
    return os.environ.get("TXNCHAOS_TEST_SPARK", "") == "all"


def spark_for(name: str, request: pytest.FixtureRequest) -> SparkSession | None:
    """The shared session when ``name``'s runs are judged again by PySpark here (starting it
    only then), else None."""
    if name in SPARK_IN_THE_SUITE or every_run_by_spark():
        session: SparkSession = request.getfixturevalue("spark")
        return session
    return None


def run_entry(
    name: str, out: Path, config: str | None = None, kafka_version: str | None = None
) -> dict[str, dict[str, Any]]:
    """Runs ``txnchaos repro NAME`` (every configuration on the project's cluster, or
    ``config``, or those on Apache Kafka ``kafka_version``), asserts it exited 0 (every
    verdict as predicted), and returns the outcomes by configuration. PySpark judges in the
    child for :data:`SPARK_IN_THE_COMMAND` only; the plain rules for the others."""
    command = ["repro", name, "--out", str(out)]
    if config is not None:
        command += ["--config", config]
    elif kafka_version is not None:
        command += ["--kafka-version", kafka_version]
    else:
        command += ["--cluster", "txnchaos"]
    if name != SPARK_IN_THE_COMMAND or kafka_version is not None:
        command += ["--engine", "reference"]
    proc = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *command],
        capture_output=True,
        text=True,
        timeout=1800,  # a loaded machine: each configuration's run (and its Spark judging)
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads((out / "repro.json").read_text())
    return {o["configuration"]: o for o in result["outcomes"]}


def assert_as_predicted(
    name: str,
    out: Path,
    outcomes: dict[str, dict[str, Any]],
    spark: SparkSession | None,
    kafka_version: str | None = None,
) -> None:
    """Every configuration of the entry on the project's cluster (or on Apache Kafka
    ``kafka_version``) ran; the bug ones are invalid with (at least) the predicted checkers
    flagging, the defended ones valid; each left its verdict, held equal to the other engine's
    verdict of the same run where PySpark judged (see the module)."""

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
    if name == SPARK_IN_THE_COMMAND and kafka_version is None:
        verdicts_json = [json.loads((out / c / "verdict.json").read_text()) for c in outcomes]
        apps = {v["spark"]["app_id"] for v in verdicts_json}
        assert len(apps) == 1, apps  # one Spark session judged every configuration


def assert_engines_agree(run_dir: Path, spark: SparkSession | None) -> None:
    """A run PySpark judged in the command: the plain rules give the same verdict. A run the
    plain rules judged: PySpark, on the suite's session, gives the same verdict (when
    ``spark`` is given)."""
    written = json.loads((run_dir / "verdict.json").read_text())
    reference = analyze(run_dir, engine="reference", write=False)
    if written["engine"] == "spark":
        assert_spark_wrote_the_rules_verdict(written, reference)
    elif spark is not None:
        from txnchaos.analysis.spark.pipeline import analyze as spark_analyze

        assert written["engine"] == "reference", written["engine"]
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
#: and timed-out-abort-hands-out-max-epoch first make 32,766 InitProducerId calls, and their
#: workloads last 180 s): bench/detection.py and the nightly job run them;
#: the bug switch each needs has its unit test (tests/cluster/test_bug_switches.py).
NIGHTLY_ONLY = ["fence-at-last-epoch-overflows", "timed-out-abort-hands-out-max-epoch"]
