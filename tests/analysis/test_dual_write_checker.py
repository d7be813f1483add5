"""The dual_write checker: its Spark form and its reference agree row for row on generated
dual-write runs with injected disagreements, and both find exactly what was injected."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.selection import nightly_except
from txnchaos.analysis.analyze import analyze
from txnchaos.analysis.reference import Item
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos.rundir.dual_write_db import (
    DbRowJson,
    DualWriteDb,
    read_dual_write_db,
    write_dual_write_db,
)
from txnchaos.rundir.errors import RunDirError
from txnchaos.rundir.final_state import FinalState, write_final_state

from .engine_support import assert_same_verdict
from .history_builder import E, H
from .reference_support import canonical, reference_judgement, spark_judgement

NAME = "dual_write"


class DualWriteRun:
    """Dual writers' transactions (prepare, then commit or abort), the database rows of the
    committed ones, the final read of the committed ones, and a final state; injections make
    the database and Kafka disagree in known ways."""

    def __init__(self, seed: int, writers: int = 2, txns: int = 6) -> None:
        self.rng = random.Random(seed)
        self.h = H()
        self.rows: list[DbRowJson] = []
        self.read: list[tuple[str, int, int, str]] = []
        self.offset = 0
        self.expected: dict[str, int] = {"database_only": 0, "kafka_only": 0, "open_prepared": 0}
        self.committed: list[tuple[str, int, list[tuple[str, int, int, str]]]] = []
        self.aborted: list[tuple[str, int, list[tuple[str, int, int, str]]]] = []
        self.final_state: FinalState = {
            "captured_ns": 9_000_000_000,
            "partitions": [
                {"topic": "t", "partition": p, "lso": 0, "high_watermark": 0, "log_start_offset": 0}
                for p in (0, 1)
            ],
            "open_transactions": [],
            "coordinator_transactions": [],
        }
        for w in range(writers):
            for txn in range(txns):
                self.transaction(f"dual-writer-{w}", txn, commit=self.rng.random() < 0.7)

    def transaction(self, writer: str, txn: int, commit: bool) -> None:
        h, n = self.h, self.rng.randint(1, 4)
        h.op(writer, E.BEGIN, txn=txn, transactional_id=writer)
        records = []
        for i in range(n):
            part, value = i % 2, f"{writer}|{txn}|{i}"
            records.append(("t", part, self.offset, value))
            h.op(writer, E.SEND, Item("t", part, self.offset, value), txn=txn)
            self.offset += 1
        h.op(
            writer, E.PREPARE, txn=txn, transactional_id=writer, producer_id=100, producer_epoch=txn
        )
        h.op(writer, E.COMMIT if commit else E.ABORT, txn=txn, transactional_id=writer)
        if commit:
            self.committed.append((writer, txn, records))
            self.rows += [
                {"value": v, "writer": writer, "txn": txn, "topic": t, "partition": p}
                for t, p, _o, v in records
            ]
            self.read += records
        else:
            self.aborted.append((writer, txn, records))

    # -- injections ----------------------------------------------------------------------------

    def lose_database_rows(self) -> None:
        """A committed transaction whose database rows are missing (some or all)."""
        *_id, records = self.committed.pop(self.rng.randrange(len(self.committed)))
        drop = {v for *_x, v in self.rng.sample(records, self.rng.randint(1, len(records)))}
        self.rows = [r for r in self.rows if r["value"] not in drop]
        self.expected["kafka_only"] += 1

    def lose_kafka_records(self) -> None:
        """A committed transaction whose records the final read does not return."""
        *_id, records = self.committed.pop(self.rng.randrange(len(self.committed)))
        drop = {v for *_x, v in self.rng.sample(records, self.rng.randint(1, len(records)))}
        self.read = [r for r in self.read if r[3] not in drop]
        self.expected["database_only"] += 1

    def commit_aborted_in_database(self) -> None:
        """An aborted transaction whose rows the database committed anyway."""
        writer, txn, records = self.aborted.pop(self.rng.randrange(len(self.aborted)))
        self.rows += [
            {"value": v, "writer": writer, "txn": txn, "topic": t, "partition": p}
            for t, p, _o, v in records
        ]
        self.expected["database_only"] += 1

    def leave_prepared_open(self) -> None:
        """A dual writer's transaction still open at its coordinator and on a partition."""
        self.final_state["coordinator_transactions"] = [
            {"transactional_id": "dual-writer-0", "producer_id": 100, "state": "Prepared"},
            {"transactional_id": "someone-else", "producer_id": 7, "state": "Ongoing"},
        ]
        self.final_state["open_transactions"] = [
            {"topic": "t", "partition": 0, "producer_id": 100, "first_offset": 3},
            {"topic": "t", "partition": 1, "producer_id": 7, "first_offset": 5},
        ]
        self.expected["open_prepared"] += 2

    def write(self, run_dir: Path) -> Path:
        self.h.read("final", *sorted(self.read, key=lambda r: r[2]), final=True)
        self.h.write(run_dir)
        write_final_state(run_dir / "final_state.json", self.final_state)
        db: DualWriteDb = {
            "captured_ns": 9_000_000_000,
            "databases": [{"kind": "sqlite", "where": "x", "rows": self.rows, "states": []}],
        }
        write_dual_write_db(run_dir, db)
        return run_dir


INJECTIONS = ("lose_database_rows", "lose_kafka_records", "commit_aborted_in_database")


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {"database_only": 0, "kafka_only": 0, "open_prepared": 0}
    for r in rows:
        out[r["kind"]] += int(r["weight"])
    return out


@pytest.mark.parametrize("seed", nightly_except([1, 2], keep={1}))
def test_spark_and_reference_agree_and_find_the_injections(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    run = DualWriteRun(seed)
    rng = random.Random(seed)
    for name in rng.sample(INJECTIONS, 2):
        getattr(run, name)()
    if seed == 2:
        run.leave_prepared_open()
    run.write(tmp_path)
    ref, spk = reference_judgement(tmp_path), spark_judgement(spark, tmp_path)
    assert canonical(spk)[NAME] == canonical(ref)[NAME]
    unknown, rows = ref[NAME]
    assert unknown is None
    assert _counts(rows) == run.expected
    # and through the whole pipelines: the verdicts count the same anomalies
    spark_verdict = spark_analyze(tmp_path, spark=spark, write=False)
    assert_same_verdict(spark_verdict, analyze(tmp_path, engine="reference", write=False))
    assert spark_verdict.checkers[NAME].counts == run.expected


def test_an_agreeing_run_is_clean(spark: SparkSession, tmp_path: Path) -> None:
    DualWriteRun(3).write(tmp_path)
    for judged in (reference_judgement(tmp_path), spark_judgement(spark, tmp_path)):
        assert judged[NAME] == (None, [])


def test_without_database_contents_the_checker_cannot_judge(
    spark: SparkSession, tmp_path: Path
) -> None:
    run = DualWriteRun(4)
    run.h.write(tmp_path)
    for judged in (reference_judgement(tmp_path), spark_judgement(spark, tmp_path)):
        unknown, rows = judged[NAME]
        assert rows == [] and unknown is not None and "dual_write_db.json" in unknown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "must be a JSON object"),
        ("{}", "lacks captured_ns"),
        ('{"captured_ns": 1}', "'databases' list"),
        ('{"captured_ns": 1, "databases": [{"kind": "sqlite", "where": "x"}]}', "'rows' list"),
        (
            '{"captured_ns": 1, "databases": [{"kind": "sqlite", "where": "x", "states": [],'
            ' "rows": [{"value": "a", "writer": "w", "txn": "1", "topic": "t", "partition": 0}]}]}',
            "'txn' should be an integer",
        ),
        ("{", "not readable JSON"),
    ],
)
def test_bad_database_contents_are_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "dual_write_db.json").write_text(text)
    with pytest.raises(RunDirError, match=message):
        read_dual_write_db(tmp_path)
