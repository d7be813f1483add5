"""The suite's Spark session: one per test process, shared by every test that judges with
Spark, and replaced when a test stopped inside a JVM call (by its timeout) left the py4j
connection out of step; without that, one slow test would fail every later Spark test of its
worker."""

from __future__ import annotations

from pyspark.sql import SparkSession


def answers_in_step(session: SparkSession) -> bool:
    """Whether the session's JVM answers each call with its own answer. A test interrupted by
    its timeout inside a py4j call leaves that call's answer unread on the connection, and
    every later call would read the answer of the call before it."""
    try:
        math = session.sparkContext._jvm.java.lang.Math  # type: ignore[union-attr]
        return bool(math.abs(-7) == 7 and math.abs(-11) == 11)
    except Exception:  # a desynchronised reply raises whatever it decodes to
        return False


def discard_jvm() -> None:
    """Forget this process's Spark JVM (killing it) so that the next session starts a new one."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        if gateway is not None:
            gateway.shutdown()
    except Exception:  # the connection is broken already: only the process is left to end
        pass
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def new_test_session() -> SparkSession:
    from txnchaos.analysis.spark import get_session

    return get_session("local[2]", app_name="txnchaos-analysis-tests")


class TestSessions:
    """The current test session, checked before each test that asks for it."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.session = new_test_session()

    def current(self) -> SparkSession:
        if not answers_in_step(self.session):
            discard_jvm()
            self.session = new_test_session()
        return self.session

    def stop(self) -> None:
        self.session.stop()
