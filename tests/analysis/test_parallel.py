"""run_parallel: calls run at once, results come back in order, an error cancels the rest."""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import SparkSession

from txnchaos.analysis.spark.parallel import run_parallel, shared_property


def test_results_come_back_in_order_and_the_first_call_runs_here(spark: SparkSession) -> None:
    here = threading.current_thread()
    results = run_parallel(
        spark,
        lambda: (threading.current_thread() is here, spark.range(10).count()),
        lambda: (threading.current_thread() is here, spark.range(20).count()),
    )
    assert results == [(True, 10), (False, 20)]


def test_the_calls_run_at_the_same_time(spark: SparkSession) -> None:
    """Each call waits for the other to have started: run one after the other, the first
    would wait in vain."""
    started = [threading.Event(), threading.Event()]

    def call(i: int) -> bool:
        started[i].set()
        seen = started[1 - i].wait(timeout=120)
        spark.range(100).count()
        return seen

    assert run_parallel(spark, lambda: call(0), lambda: call(1)) == [True, True]


def test_an_error_cancels_the_running_jobs_and_is_raised(spark: SparkSession) -> None:
    tracker = spark.sparkContext.statusTracker()

    def fail_once_a_job_runs() -> None:
        deadline = time.monotonic() + 120
        while not tracker.getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.05)
        raise ValueError("checker broke")

    def endless_job() -> int:
        # minutes of work unless cancelled
        return int(spark.range(0, 10**12, numPartitions=2).selectExpr("sum(id)").collect()[0][0])

    with pytest.raises(ValueError, match="checker broke"):
        run_parallel(spark, fail_once_a_job_runs, endless_job)
    assert not tracker.getActiveJobsIds()


def test_a_shared_property_is_computed_once_when_threads_ask_at_once() -> None:
    inside = threading.Condition()
    calls: list[int] = []

    class Holder:
        @shared_property
        def value(self) -> object:
            with inside:
                calls.append(1)
                inside.notify_all()
                # without the lock a second thread would be in here now: wait for it briefly
                # (with the lock it never comes)
                inside.wait_for(lambda: len(calls) > 1, timeout=1)
            return object()

    h = Holder()
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(h.value)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(got) == 4 and all(g is got[0] for g in got)
