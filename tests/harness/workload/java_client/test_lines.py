"""The line protocol between a workload user and its Java client: the Python side's encoding
and parsing, and one real JVM (no cluster) that parses commands with its own escaping rules
and answers in JSON."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from txnchaos.harness.workload.java_client.lines import (
    JavaError,
    ProtocolError,
    command,
    escape,
    ids,
    parse,
)
from txnchaos.harness.workload.java_client.process import JavaCallError, JavaProcess
from txnchaos.harness.workload.java_client.versions import DEFAULT_VERSION
from txnchaos.harness.workload.recording import ErrorClass

TRICKY = ["a\tb", "x\\y", "line\nbreak\r", "", "\\N", "w|3|0", "ünï €"]


def test_fields_are_escaped_and_null_is_its_own_field() -> None:
    assert escape(None) == "\\N"
    assert escape("\\N") == "\\\\N"  # a value that spells null is not null
    assert escape("a\tb\nc\\") == "a\\tb\\nc\\\\"
    assert escape(True) == "true" and escape(7) == "7"
    line = command(3, "send", "events", 2, None, "p|0|1", 0)
    assert line == "3\tsend\tevents\t2\t\\N\tp|0|1\t0\n"
    assert line.count("\n") == 1


def test_answers_acks_and_events_parse() -> None:
    ok = parse('{"re": 4, "ok": true, "ids": [12, 3]}')
    assert ids(ok) == (12, 3)
    failed = parse(
        '{"re": 5, "ok": false, "error": {"class": "abortable", "name": "KafkaException",'
        ' "message": "boom"}}'
    )
    error = failed["error"]
    assert isinstance(error, JavaError) and error.error_class == ErrorClass.ABORTABLE
    assert error.failure.text == "KafkaException (abortable): boom"
    assert parse('{"ack": 9, "offset": 41}')["offset"] == 41
    lost = parse(
        '{"ack": 9, "sent": false, "error": {"class": "other", "name": "X", "message": ""}}'
    )
    assert lost["sent"] is False
    assert parse('{"event": "assigned", "parts": [["t", 0]]}')["parts"] == [["t", 0]]
    assert parse('{"ready": true, "version": "4.1.1", "two_phase": false}')["ready"]
    assert ids(parse('{"re": 1, "ok": true}')) is None


@pytest.mark.parametrize(
    "line",
    [
        "SLF4J: a library printed this",
        "[1, 2]",
        '{"re": "1", "ok": true}',
        '{"re": 1}',
        '{"ack": 2}',
        '{"ack": 2, "error": {"class": "bad", "name": "X", "message": ""}}',
        '{"event": "joined", "parts": []}',
        '{"something": 1}',
    ],
)
def test_other_lines_are_protocol_errors(line: str) -> None:
    with pytest.raises(ProtocolError):
        parse(line)


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_the_java_side_reads_what_python_writes(tmp_path: Path) -> None:
    """A real JVM echoes fields back: every escape survives the round trip, null included;
    an unknown command is a failed answer, not a dead process."""
    java = JavaProcess("echo", DEFAULT_VERSION, tmp_path / "java.log")
    hello = java.start(120)
    try:
        assert hello.version == DEFAULT_VERSION
        assert hello.two_phase is False  # no kafka-clients release has KIP-939's API
        answer = java.request("echo", *TRICKY, None, timeout_s=60)
        assert answer["fields"] == [*TRICKY, None]
        with pytest.raises(JavaCallError) as failed:
            java.request("no_such_command", timeout_s=60)
        assert failed.value.error.name == "IllegalArgumentException"
        assert java.request("echo", "still", timeout_s=60)["fields"] == ["still"]
    finally:
        java.stop()
    assert not java.alive


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_two_phase_commit_is_refused_by_a_client_without_it(tmp_path: Path) -> None:
    """KIP-939's calls on a release without its API (every release up to 4.4.0) fail with
    one line naming the release, and the producer stays usable (no cluster is needed: a
    producer connects only when it first sends a request)."""
    java = JavaProcess("two-phase", DEFAULT_VERSION, tmp_path / "java.log")
    java.start(120)
    try:
        java.request(
            "producer", "bootstrap.servers=127.0.0.1:9", "transactional.id=t", timeout_s=60
        )
        for name, *fields in (("prepare",), ("complete", "5:0"), ("init", True)):
            with pytest.raises(JavaCallError) as refused:
                java.request(name, *fields, timeout_s=60)
            error = refused.value.error
            assert error.name == "UnsupportedOperationException"
            assert error.message.startswith(
                f"KIP-939 two-phase commit is not supported by kafka-clients {DEFAULT_VERSION}:"
            )
        java.request("close_producer", 0, timeout_s=60)
    finally:
        java.stop()
