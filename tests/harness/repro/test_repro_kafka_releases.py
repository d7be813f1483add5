"""Reported bugs on the Apache Kafka releases they were reported against, and gone on the
release that fixed them: `txnchaos repro NAME --kafka-version V` as a user runs it (real
JVMs of that release, fetched from Maven Central into the cache once; real clients; the
real analysis: the plain rules, and PySpark on the suite's shared session for one of them,
held equal; see repro_runs.py).

One release per test, so that a clean machine's first fetch of a release stays inside one
test's time. The rest of the catalogue's releases run in bench/detection.py and the nightly
job (docs/reproducing-bugs.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.repro.repro_runs import assert_as_predicted, run_entry, spark_for
from tests.selection import nightly_except

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow]

#: (entry, release): an affected release (invalid, the predicted checkers flagging) and the
#: release that fixed it (valid), for two reported bugs
#: (3.6.0, produce-after-abort's fix release, runs in bench/detection.py and the nightly job:
#: the suite keeps three release runs, one JVM cluster each, a minute or two apiece)
RELEASES = [
    # KAFKA-14402 / KAFKA-14561: a Produce delayed past its transaction's abort
    ("produce-after-abort", "3.5.2"),  # before KIP-890 part 1: hanging_transactions
    # KAFKA-14562: a Produce delayed into the next transaction, on the newest release at
    # transaction.version 1 (an aborted read) and 2 (valid)
    ("produce-into-next-transaction", "4.4.0"),
]


@pytest.mark.timeout(600)  # a release's cluster start is most of it (JVMs on 2 cores)
#: CI runs the first (the second, four minutes on two cores, with ``pytest -m nightly``)
@pytest.mark.parametrize(
    ("name", "release"), nightly_except(RELEASES, keep={"produce-after-abort"})
)
def test_a_reported_bug_on_its_releases(
    name: str, release: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    out = tmp_path / f"{name}-{release}"
    outcomes = run_entry(name, out, kafka_version=release)
    assert outcomes, f"{name} names no configuration on Apache Kafka {release}"
    assert all(o["cluster"] == f"Apache Kafka {release}" for o in outcomes.values())
    spark = spark_for(f"{name}-{release}", request)
    assert_as_predicted(name, out, outcomes, spark, kafka_version=release)
