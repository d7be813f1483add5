"""Shared fixtures: real node processes started with the local launcher; one SparkSession."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from txnchaos.harness.launch.local import LocalCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.spark_session import TestSessions


def child_commands(pid: int) -> list[str]:
    """The command lines of the live child processes of ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(cmd)
    return out


def start_cluster(
    root: Path, brokers: int = 1, coordinators: int = 0, settings: list[str] | None = None
) -> LocalCluster:
    cluster = LocalCluster.prepare(root, brokers, coordinators, settings or [])
    cluster.up()
    return cluster


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One two-broker cluster for tests that only need a working cluster and use their
    own topics."""
    cluster = start_cluster(tmp_path_factory.mktemp("shared-cluster"), brokers=2)
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def bootstrap(shared_cluster: LocalCluster) -> str:
    return shared_cluster.state()["bootstrap"]


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A private single-broker cluster, for tests that kill or restart nodes."""
    cluster = start_cluster(tmp_path / "cluster", brokers=1)
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[TestSessions]:
    """The one Spark session of this test process (see tests/spark_session.py)."""
    from tests.spark_session import TestSessions

    sessions = TestSessions()
    yield sessions
    sessions.stop()


@pytest.fixture
def spark(spark_sessions: TestSessions) -> SparkSession:
    """One SparkSession for every test that judges with Spark (starting Spark costs seconds;
    imported here only when a test asks for it), replaced when a timed-out test left it out
    of step."""
    return spark_sessions.current()
