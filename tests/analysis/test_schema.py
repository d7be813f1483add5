"""The history schema, writer, compaction and run-directory validation (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from txnchaos.rundir.compact import compact_to_parquet
from txnchaos.rundir.run_dir import RunDirError, open_run_dir, write_run_info
from txnchaos.rundir.schema import (
    HISTORY_ARROW_SCHEMA,
    EventType,
    MetricName,
    canonical_metric_name,
    decode_value,
    encode_value,
    history_spark_schema,
)
from txnchaos.rundir.writer import HistoryWriter


def test_spark_schema_is_derived_from_arrow_schema() -> None:
    spark_schema = history_spark_schema()
    assert spark_schema.fieldNames() == HISTORY_ARROW_SCHEMA.names


def test_value_round_trip() -> None:
    assert decode_value(encode_value("w1", 7, 3)) == ("w1", 7, 3)
    assert decode_value(encode_value("idem", None, 0)) == ("idem", None, 0)
    assert decode_value("garbage") is None
    with pytest.raises(ValueError):
        encode_value("a|b", 1, 1)


def test_metric_names_are_canonicalised() -> None:
    jmx = "kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount"
    assert canonical_metric_name(jmx) == MetricName.PARTITIONS_WITH_LATE_TXNS
    prom = "kafka_cluster_partition_laststableoffsetlag"
    assert canonical_metric_name(prom) == MetricName.LAST_STABLE_OFFSET_LAG
    assert canonical_metric_name("something_else") == "something_else"


def test_writer_and_compaction_survive_a_crash(tmp_path: Path) -> None:
    write_run_info(tmp_path, scenario="t", seed=1)
    with HistoryWriter(tmp_path, "p1") as w:
        op = w.invoke(EventType.BEGIN, txn=0)
        w.complete(op, "ok")
        send = w.invoke(
            EventType.SEND, txn=0, items=[{"topic": "t", "partition": 0, "value": "p1|0|0"}]
        )
        w.complete(
            send, "ok", items=[{"topic": "t", "partition": 0, "value": "p1|0|0", "offset": 4}]
        )
        w.invoke(EventType.COMMIT, txn=0)  # never completes: the process "crashes"
        w.record(
            EventType.POLL,
            items=[
                {"topic": "t", "partition": 0, "offset": 4, "value": "p1|0|0"},
                {"topic": "t", "partition": 0, "offset": 5, "value": "x"},
            ],
        )
    with (tmp_path / "history" / "p1.jsonl").open("a") as fh:
        fh.write('{"process":"p1","op_id":9,"ty')  # torn last line
    stats = compact_to_parquet(tmp_path)
    assert stats.unfinished_ops == 1
    rows = pq.read_table(tmp_path / "history.parquet").to_pylist()
    assert len(rows) == 5  # begin, send, commit(info), poll x2
    commit = next(r for r in rows if r["type"] == "commit")
    assert commit["outcome"] == "info" and commit["complete_ns"] is None
    polls = [r for r in rows if r["type"] == "poll"]
    assert [(r["item"], r["offset"]) for r in polls] == [(0, 4), (1, 5)]
    send_row = next(r for r in rows if r["type"] == "send")
    assert send_row["offset"] == 4 and send_row["txn"] == 0
    assert open_run_dir(tmp_path).history_parquet is not None


def test_run_dir_errors_name_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="does not exist"):
        open_run_dir(tmp_path / "nope")
    with pytest.raises(RunDirError, match=r"run\.json is missing"):
        open_run_dir(tmp_path)
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(RunDirError, match="not valid JSON"):
        open_run_dir(tmp_path)
    write_run_info(tmp_path, scenario="t")
    with pytest.raises(RunDirError, match="no history"):
        open_run_dir(tmp_path)
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "a.jsonl").write_text("")
    (tmp_path / "final_state.json").write_text(json.dumps({"partitions": [{"topic": "t"}]}))
    with pytest.raises(RunDirError, match="lacks partition, lso"):
        open_run_dir(tmp_path)


def test_fault_log_lines_become_fault_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The nemesis' fault log (rundir/fault_log.py) is what the analysis reads."""
    from txnchaos.rundir.compact import read_faults
    from txnchaos.rundir.fault_log import FaultLog

    with FaultLog(tmp_path) as log:
        log.write(
            "delay", 100.0, 102.5, link="client->1", target={"api": "Produce"}, params={"ms": 200}
        )
        log.write("kill", 110.0, 113.0, target={"node": 2})
    rows = read_faults(tmp_path).to_pylist()
    assert [(r["kind"], r["start_ns"], r["end_ns"], r["target"]) for r in rows] == [
        ("delay", 100_000_000_000, 102_500_000_000, "client->1"),
        ("kill", 110_000_000_000, 113_000_000_000, "node 2"),
    ]
    assert '"ms":200' in rows[0]["detail"]
