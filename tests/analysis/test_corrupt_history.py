"""Damaged run directories: a torn line (a writer killed mid-write) is skipped with a note that
reaches the verdict; any other bad line fails the analysis naming the file and line, before
Spark starts, and never yields a verdict.  Only the last two tests start Spark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from txnchaos.analysis.analyze import RunJudge, main_analyze
from txnchaos.analysis.load import prepare_run
from txnchaos.analysis.spark import pipeline
from txnchaos.jobs.judging import analyze_run_dir
from txnchaos.rundir.compact import (
    compact_metrics,
    compact_run,
    compact_to_parquet,
    parquet_notes,
    read_faults,
)
from txnchaos.rundir.jsonl import CorruptLineError
from txnchaos.rundir.run_dir import RunDirError, append_metric_samples, write_run_info
from txnchaos.rundir.schema import EventType, encode_value
from txnchaos.rundir.writer import HistoryWriter

OP = {"process": "w0", "type": "poll", "invoke_ns": 1, "outcome": "ok", "complete_ns": 2}
TORN = '{"process":"w0","op_id":99,"type":"po'


def line(**fields: object) -> str:
    return json.dumps({**OP, **fields})


def history_run(root: Path, polls: int = 5) -> Path:
    """A run directory with one consumer's history of ``polls`` polls (one record each)."""
    write_run_info(root, scenario="t", seed=1)
    with HistoryWriter(root, "w0") as w:
        for i in range(polls):
            w.record(EventType.POLL, items=[{"topic": "t", "partition": 0, "offset": i}])
    return root / "history" / "w0.jsonl"


def test_torn_final_line_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = history_run(tmp_path)
    with path.open("a") as fh:
        fh.write(TORN)  # no newline: the writer was killed mid-write
    stats = compact_to_parquet(tmp_path)
    assert stats.lines_skipped == 1 and stats.rows == 5
    assert stats.notes == [f"{path}:6: torn final line skipped ({len(TORN)} bytes without a "
                           "newline: the writer stopped mid-write)"]  # fmt: skip
    assert parquet_notes(tmp_path / "history.parquet") == stats.notes  # travels with the file


def test_a_complete_final_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = history_run(tmp_path)
    with path.open("a") as fh:
        fh.write(line(op_id=5))
    stats = compact_to_parquet(tmp_path)
    assert stats.rows == 6 and stats.notes == [] and stats.lines_skipped == 0


def test_a_torn_line_the_writer_resumed_after_is_skipped_with_a_note(tmp_path: Path) -> None:
    """A crashed process's history gets a STOP appended on its behalf (crash.record_crash):
    the torn line then sits in the middle of the file, marked by the resuming writer."""
    path = history_run(tmp_path)
    with path.open("a") as fh:
        fh.write(TORN)
    with HistoryWriter.resume(tmp_path, "w0") as w:
        w.record(EventType.STOP, "info", error="killed (SIGKILL)")
    stats = compact_to_parquet(tmp_path)
    assert stats.lines_skipped == 1
    assert len(stats.notes) == 1 and stats.notes[0].startswith(f"{path}:6: torn line skipped")
    rows = pq.read_table(tmp_path / "history.parquet").to_pylist()
    assert [r["type"] for r in rows][-1] == "stop" and len(rows) == 6


@pytest.mark.parametrize(
    "bad, problem",
    [
        ("GARBAGE", "not JSON"),
        (TORN, "not JSON"),  # a fragment in the middle that no resuming writer marked
        ("[1, 2]", "expected a JSON object, got an array"),
        (line(op_id="5"), "field 'op_id' should be an integer"),
        (line(op_id=True), "field 'op_id' should be an integer"),
        (line(op_id=5.5), "field 'op_id' should be an integer"),
        (line(op_id=5, producer_epoch=1 << 40), "field 'producer_epoch' should be an integer"),
        (line(op_id=5, process=None), "required field 'process' is missing"),
        (json.dumps({"process": "w0", "op_id": 5}), "required field 'type' is missing"),
        (line(op_id=5, type="teleport"), "field 'type' should be an event type"),
        (line(op_id=5, outcome="maybe"), "field 'outcome' should be ok, fail, info or null"),
        (line(op_id=5, items={"topic": "t"}), "field 'items' should be an array"),
        (line(op_id=5, items=[None]), "items[0] should be an object"),
        (line(op_id=5, items=[{"partition": "0"}]), "items[0].partition"),
        ('{"process":"w0","op_id":5,"op_id":6,"type":"poll","invoke_ns":1}', "appears twice"),
        ('{"process":"w\xe9","op_id":5,"type":"poll","invoke_ns":1}', "not UTF-8"),
    ],
)
def test_a_bad_line_in_the_middle_names_file_and_line(
    tmp_path: Path, bad: str, problem: str
) -> None:
    path = history_run(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    encoded = bad.encode("latin-1") if "\xe9" in bad else bad.encode()
    path.write_bytes(b"".join(lines[:2]) + encoded + b"\n" + b"".join(lines[2:]))
    with pytest.raises(CorruptLineError, match=re.escape(problem)) as err:
        compact_to_parquet(tmp_path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert (err.value.path, err.value.line) == (path, 3)
    assert not (tmp_path / "history.parquet").exists()  # nothing judged from a partial read


def test_garbage_as_the_final_line_is_no_torn_line(tmp_path: Path) -> None:
    path = history_run(tmp_path)
    with path.open("ab") as fh:
        fh.write(b"\x00\x00\x89 not an object")  # no newline, but no object either
    with pytest.raises(CorruptLineError, match=r"w0\.jsonl:6: not UTF-8"):
        compact_to_parquet(tmp_path)


def test_a_binary_or_unreadable_history_file_is_refused(tmp_path: Path) -> None:
    path = history_run(tmp_path)
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff")
    with pytest.raises(CorruptLineError, match=r"w0\.jsonl:1: not UTF-8"):
        compact_to_parquet(tmp_path)
    path.unlink()
    path.mkdir()  # a directory named like a history file
    with pytest.raises(CorruptLineError, match=r"w0\.jsonl: cannot be read"):
        compact_to_parquet(tmp_path)


def _metrics(root: Path, samples: list[dict[str, object]]) -> Path:
    append_metric_samples(root, "node-1", samples)
    return root / "metrics" / "node-1.jsonl"


SAMPLE = {"time_ns": 1, "name": "LastStableOffsetLag", "labels": {"topic": "t", "partition": "0"}}


def test_metrics_lines_are_read_the_same_way(tmp_path: Path) -> None:
    path = _metrics(tmp_path, [{**SAMPLE, "value": 1.0}, {**SAMPLE, "value": 2.0}])
    with path.open("a") as fh:
        fh.write('{"time_ns": 3, "na')
    notes: list[str] = []
    out = compact_metrics(tmp_path, notes)
    assert out is not None and pq.read_table(out).num_rows == 2
    assert len(notes) == 1 and notes[0].startswith(f"{path}:3: torn final line skipped")
    assert parquet_notes(out) == notes

    for bad, problem in [
        ("GARBAGE", "not JSON"),
        (json.dumps({**SAMPLE, "value": "high"}), "field 'value' should be a number"),
        (json.dumps({**SAMPLE}), "required field 'value'"),
        (json.dumps({**SAMPLE, "value": 1, "labels": ["t"]}), "field 'labels' should be an"),
        (json.dumps({**SAMPLE, "value": 1, "labels": {"partition": "x"}}), "label 'partition'"),
    ]:
        path.write_text(json.dumps({**SAMPLE, "value": 1.0}) + "\n" + bad + "\n")
        with pytest.raises(CorruptLineError, match=re.escape(problem)) as err:
            compact_metrics(tmp_path)
        assert str(err.value).startswith(f"{path}:2: ")


def test_fault_log_lines_are_read_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    good = json.dumps({"kind": "kill", "start": 1.0, "end": 2.0, "target": {"node": 1}})
    path.write_text(good + "\n" + '{"kind": "de')
    notes: list[str] = []
    assert read_faults(tmp_path, notes).num_rows == 1
    assert len(notes) == 1 and notes[0].startswith(f"{path}:2: torn final line skipped")
    for bad, problem in [
        ("GARBAGE", "not JSON"),
        (json.dumps({"kind": "kill", "start": "soon"}), "field 'start' should be a number"),
        (json.dumps({"kind": "kill"}), "required field 'start'"),
        (json.dumps({"kind": "kill", "start": 1.0, "target": "n1"}), "field 'target'"),
        (json.dumps({"start_ns": "1", "kind": "kill"}), "field 'start_ns' should be an integer"),
    ]:
        path.write_text(bad + "\n" + good + "\n")
        with pytest.raises(CorruptLineError, match=re.escape(problem)) as err:
            read_faults(tmp_path)
        assert str(err.value).startswith(f"{path}:1: ")


def test_prepare_run_gathers_every_note_and_refuses_a_bad_line(tmp_path: Path) -> None:
    history = history_run(tmp_path)
    with history.open("a") as fh:
        fh.write(TORN)
    metrics = _metrics(tmp_path, [{**SAMPLE, "value": 1.0}])
    with metrics.open("a") as fh:
        fh.write('{"time_ns": 3')
    (tmp_path / "faults.jsonl").write_text('{"kind": "kill", "start": 1.0}\n{"ki')
    with pytest.raises(RunDirError, match="not compacted"):  # the analysis only reads
        prepare_run(tmp_path)
    compact_run(tmp_path)  # the writer side (the harness, or `txnchaos analyze` first)
    run = prepare_run(tmp_path)
    assert [n.split(":")[0] for n in run.notes] == [
        str(history),
        str(metrics),
        str(tmp_path / "faults.jsonl"),
    ]

    (tmp_path / "faults.jsonl").write_text('{"kind": "kill"}\n')
    with pytest.raises(RunDirError, match=r"faults\.jsonl:1: required field 'start'"):
        prepare_run(tmp_path)


def test_analyze_exits_2_naming_the_line_and_writes_no_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported case: one garbage line in a consumer's history used to drop the events
    around it silently and judge the run VALID.  (Refused before Spark starts.)"""
    path = history_run(tmp_path, polls=30)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:15]) + "#garbage#\n" + "".join(lines[15:]))
    assert analyze_run_dir(tmp_path, RunJudge()) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"txnchaos analyze: {path}:16: not JSON (Expecting value at column 1): '#garbage#'"
    )
    assert "verdict" not in captured.out.lower()
    assert not (tmp_path / "verdict.json").exists()
    assert not (tmp_path / "history.parquet").exists()


def test_a_torn_final_line_is_judged_and_noted_in_the_verdict(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run_info(tmp_path, scenario="torn", seed=1, complete=False)
    with HistoryWriter(tmp_path, "w0") as w:
        for txn in range(2):
            w.complete(w.invoke(EventType.BEGIN, txn=txn), "ok")
            item = {"topic": "t", "partition": 0, "value": encode_value("w0", txn, 0)}
            sent = w.invoke(EventType.SEND, txn=txn, items=[item])
            w.complete(sent, "ok", items=[{**item, "offset": txn * 2}])
            w.complete(w.invoke(EventType.COMMIT, txn=txn), "ok")
    path = tmp_path / "history" / "w0.jsonl"
    with path.open("a") as fh:
        fh.write('{"process":"w0","op_id":6,"type":"begin","invoke_n')
    assert analyze_run_dir(tmp_path, RunJudge(spark=spark)) == 0
    out = capsys.readouterr().out
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["status"] == "valid"
    assert len(verdict["notes"]) == 1
    assert verdict["notes"][0].startswith(f"{path}:13: torn final line skipped")
    assert f"note: {verdict['notes'][0]}" in out
    assert verdict["stats"]["transactions"] == {"committed": 2}


def test_corrupt_parquet_pages_exit_2_naming_the_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sound footer over broken pages passes every check before Spark: the failed read
    becomes one line naming the file, not a Java stack trace and an "internal error"."""
    history_run(tmp_path, polls=2000)
    compact_to_parquet(tmp_path)
    parquet = tmp_path / "history.parquet"
    data = bytearray(parquet.read_bytes())
    data[100 : len(data) // 2] = b"\xab" * (len(data) // 2 - 100)
    parquet.write_bytes(bytes(data))
    assert pipeline.main_analyze(tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"txnchaos analyze: {parquet} is not readable Parquet"), err
    assert not (tmp_path / "verdict.json").exists()
    # the reference engine refuses it alike, in its own words after the file's name
    assert main_analyze(tmp_path, engine="reference") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"txnchaos analyze: {parquet} is not readable Parquet"), err
    assert not (tmp_path / "verdict.json").exists()
