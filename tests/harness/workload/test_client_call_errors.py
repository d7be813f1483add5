"""A librdkafka call that failed and then served a callback with its KafkaException still set
raises SystemError caused by that KafkaException (seen on the nightly process mix: a fenced
producer's flush, its statistics callback); the client wrappers raise the KafkaException, which
the workers handle, instead of a SystemError that ended the workload."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException

from txnchaos.harness.workload.clients import DirectExecutor, run_client_call


def _fenced_then_callback() -> None:
    try:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    except KafkaException as exc:
        raise SystemError("<method 'startswith' of 'str' objects> returned a result") from exc


def test_the_kafka_error_is_raised_not_the_system_error() -> None:
    with pytest.raises(KafkaException) as caught:
        run_client_call(DirectExecutor(), _fenced_then_callback)
    assert caught.value.args[0].code() == KafkaError._FENCED


def test_a_system_error_without_cause_is_a_fatal_kafka_error() -> None:
    def broken() -> None:
        raise SystemError("flush returned NULL without setting an exception")

    with pytest.raises(KafkaException) as caught:
        run_client_call(DirectExecutor(), broken)
    err = caught.value.args[0]
    assert err.fatal() and err.code() == KafkaError._FATAL
    assert "returned NULL" in err.str()


def test_other_calls_pass_through() -> None:
    assert run_client_call(DirectExecutor(), json.loads, "[1]") == [1]
    with pytest.raises(ValueError):
        run_client_call(DirectExecutor(), json.loads, "[")


def test_gevent_does_not_rethrow_a_handled_system_error_into_the_main_greenlet() -> None:
    from gevent.hub import Hub

    from txnchaos.harness.workload.clients import GeventExecutor

    GeventExecutor(min_threads=1)
    assert SystemError not in Hub.SYSTEM_ERROR
    assert KeyboardInterrupt in Hub.SYSTEM_ERROR and SystemExit in Hub.SYSTEM_ERROR
