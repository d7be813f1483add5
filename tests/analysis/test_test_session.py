"""The suite's shared Spark session is replaced when its JVM stops answering in step, so one
test that broke it (a timeout inside a JVM call, a JVM that died) fails alone instead of every
later Spark test of its worker."""

from __future__ import annotations

from pyspark import SparkContext

from tests.spark_session import TestSessions, answers_in_step


def test_a_session_whose_jvm_died_is_replaced(spark_sessions: TestSessions) -> None:
    before = spark_sessions.current()
    assert answers_in_step(before)
    gateway = SparkContext._gateway
    assert gateway is not None and gateway.proc is not None
    gateway.proc.kill()
    gateway.proc.wait()
    assert not answers_in_step(before)
    after = spark_sessions.current()
    assert after is not before and answers_in_step(after)
    assert after.range(5).count() == 5
