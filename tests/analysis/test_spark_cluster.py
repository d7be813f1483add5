"""Judging on a real Spark standalone cluster (a master and a one-core worker started from the
installed PySpark) gives the local verdict, the executors reading the run from a URI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession

from txnchaos.analysis.spark.pipeline import analyze
from txnchaos.rundir.run_dir import RunDirError

from .helpers import build

#: how long the master and worker may take to come up (a condition is awaited; this only bounds
#: a cluster that never does)
READY_TIMEOUT_S = 120.0
#: settings of the test's cluster and of the drivers that use it: C1 only in every JVM (short
#: jobs), the master's REST submission server off (it would take a fixed port)
SPARK_DEFAULTS = """\
spark.master.rest.enabled false
spark.executor.extraJavaOptions -XX:TieredStopAtLevel=1
spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _master_state(web_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json", timeout=5) as r:
            return dict(json.load(r))
    except OSError:
        return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def cluster_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment of the cluster's daemons and of drivers using it: loopback only, the test's
    spark-defaults.conf."""
    conf = tmp_path_factory.mktemp("spark-conf")
    (conf / "spark-defaults.conf").write_text(SPARK_DEFAULTS, encoding="utf-8")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(conf))
    env.pop("TXNCHAOS_SPARK_MASTER", None)
    return env


class StandaloneCluster:
    """A master and one one-core worker, started from the installed PySpark; they come up
    while the caller does other work (:meth:`wait_ready`)."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.procs: list[subprocess.Popen[bytes]] = []
        port, self.web, worker_web = _free_port(), _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(self.web)),
        )
        self._start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
            *("--webui-port", str(worker_web), "--work-dir", str(logs / "work")),
        )

    def _start(self, name: str, *args: str) -> None:
        spark_class = str(Path(_find_spark_home()) / "bin" / "spark-class")
        with (self.logs / f"{name}.log").open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def wait_ready(self) -> str:
        """The master's URL, once the master's /json lists the worker alive."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            state = _master_state(self.web)
            if state is not None and state.get("aliveworkers", 0) >= 1:
                return self.url
            if any(p.poll() is not None for p in self.procs) or time.monotonic() > deadline:
                pytest.fail(f"the standalone cluster did not come up; logs in {self.logs}")
            time.sleep(0.2)

    def stop(self) -> None:
        for p in reversed(self.procs):
            _stop(p)


@pytest.fixture(scope="module")
def standalone_cluster(
    tmp_path_factory: pytest.TempPathFactory, cluster_env: dict[str, str]
) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), cluster_env)
    try:
        yield cluster
    finally:
        cluster.stop()


def _counts(checkers: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {name: {k: n for k, n in c["counts"].items() if n} for name, c in checkers.items()}


@pytest.mark.nightly  # minutes on two cores: a standalone Spark cluster and two analyses
def test_a_cluster_judges_a_run_as_the_local_master_does(
    standalone_cluster: StandaloneCluster,  # first: it boots while the local session starts
    spark: SparkSession,
    cluster_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """``txnchaos analyze --master spark://... --input-uri`` on a real standalone cluster, its
    executors reading a copy of the run on a "shared mount": the local verdict, anomaly for
    anomaly."""
    synth = build(seed=5, writers=2, txns_per_writer=10, consumers=1, metrics=False)
    planted = synth.inject_aborted_read()
    run_dir = synth.write(tmp_path / "run")
    shared = tmp_path / "shared-mount" / "run"
    shutil.copytree(run_dir, shared)
    local = analyze(run_dir, spark=spark, write=False).to_json()
    assert local["status"] == "invalid", planted
    master = standalone_cluster.wait_ready()  # it came up while the local master judged

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "txnchaos.jobs.cli",
            "analyze",
            str(run_dir),
            "--master",
            master,
            "--input-uri",
            shared.as_uri(),
        ],
        env=cluster_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    remote = json.loads((run_dir / "verdict.json").read_text(encoding="utf-8"))
    assert remote["engine"] == "spark"
    assert remote["status"] == local["status"]
    assert _counts(remote["checkers"]) == _counts(local["checkers"])
    assert remote["stats"]["events"] == local["stats"]["events"]
    # shuffle partitions follow the history's size on a cluster too: Spark's default of 200 a
    # shuffle runs thousands of tasks for a tiny history
    (executor_log,) = (standalone_cluster.logs / "work").glob("app-*/*/stderr")
    tasks = executor_log.read_text(errors="replace").count("Running task")
    assert 0 < tasks < 500, tasks


def test_executors_read_the_copy_at_the_input_uri(spark: SparkSession, tmp_path: Path) -> None:
    """The Parquet files come from ``input_uri``, not the run directory: a copy that lost rows
    (a stale or partial upload) is refused by name, on the local master as on a cluster."""
    run_dir = build(seed=6, writers=1, txns_per_writer=5, consumers=1).write(tmp_path / "run")
    stale = tmp_path / "bucket" / "run"
    shutil.copytree(run_dir, stale)
    table = pq.read_table(stale / "history.parquet")
    pq.write_table(table.slice(0, table.num_rows // 2), stale / "history.parquet")
    with pytest.raises(RunDirError, match=r"holds \d+ history rows, the run directory \d+"):
        analyze(run_dir, spark=spark, write=False, input_uri=stale.as_uri())
    with pytest.raises(RunDirError, match=r"--input-uri: .*nowhere.* could not be read"):
        analyze(run_dir, spark=spark, write=False, input_uri=(tmp_path / "nowhere").as_uri())


def test_asking_for_another_master_replaces_the_active_session() -> None:
    """One SparkContext per process: ``--master`` must not be answered by a session already
    running elsewhere (Spark's builder would hand that one back with a warning only)."""
    code = (
        "from txnchaos.analysis.spark import get_session\n"
        "first = get_session('local[1]')\n"
        "second = get_session('local[2]')\n"
        "print(first.sparkContext.master, second.sparkContext.master)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.split() == ["local[1]", "local[2]"], done.stderr[-2000:]
