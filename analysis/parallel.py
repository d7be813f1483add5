"""Drive a few independent Spark computations at once.

A local analysis is CPU-bound on few cores, yet about a sixth of its wall time no task runs:
the driver is planning the next query, generating and compiling its code, or waiting for the
last task of a stage while the other cores idle.  Queries started from two or three Python
threads fill those gaps: one thread's planning and stage tails overlap the other's tasks.
Spark's scheduler runs the jobs of several threads side by side; PySpark pins each Python
thread to a JVM thread of its own (``InheritableThread`` carries the job descriptions and
other local properties over).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark import InheritableThread
from pyspark.sql import SparkSession


def run_parallel(spark: SparkSession, *calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` at once (the first in this thread) and return their results in order.
    If one raises, the Spark jobs still running are cancelled and the first error (in the
    order of ``calls``) is raised once every call has returned."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def call(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as e:  # re-raised below, in the caller's thread
            errors[i] = e
            spark.sparkContext.cancelAllJobs()

    threads = [
        InheritableThread(call, args=(i,), name=f"txnchaos-parallel-{i}", daemon=True)
        for i in range(1, len(calls))
    ]
    for t in threads:
        t.start()
    try:
        call(0)
    finally:
        for t in threads:
            t.join()
    for e in errors:
        if e is not None:
            raise e
    return results
