"""Drive a few independent Spark computations at once.

A local analysis is CPU-bound on few cores, yet for part of its wall time no task runs: the
driver is planning the next query, generating and compiling its code, or waiting for the
last task of a stage while the other cores idle.  Queries started from two or three Python
threads fill those gaps: one thread's planning and stage tails overlap the other's tasks.
Spark's scheduler runs the jobs of several threads side by side; PySpark pins each Python
thread to a JVM thread of its own (``InheritableThread`` carries the job descriptions and
other local properties over).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any, Generic, TypeVar

from pyspark import InheritableThread
from pyspark.sql import SparkSession


def run_parallel(spark: SparkSession, *calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` at once (the first in this thread) and return their results in order.
    If one raises, the Spark jobs still running are cancelled and the first error (in the
    order of ``calls``) is raised once every call has returned."""
    if not calls:
        return []
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


T = TypeVar("T")


class shared_property(cached_property[T], Generic[T]):
    """A ``cached_property`` computed once per instance even when several threads ask for it at
    once (run_parallel reads projections from several threads; Python 3.12 dropped
    ``cached_property``'s lock, and 3.11's is one per property for all instances).  Each
    property of an instance has a lock of its own; a property computed from others takes their
    locks after its own, in the order the properties depend on each other, so no two threads
    wait on each other."""

    def __get__(self, instance: Any, owner: type[Any] | None = None) -> Any:
        if instance is None:
            return self
        cache = instance.__dict__
        name = self.attrname or self.func.__name__
        if name in cache:
            return cache[name]
        locks: dict[str, threading.Lock] = cache.setdefault("_property_locks", {})
        with locks.setdefault(name, threading.Lock()):  # setdefault: one winner per name
            if name not in cache:
                cache[name] = self.func(instance)
            return cache[name]
