"""bench/kafka_matrix.py names KAFKA-20734 behind an invalid Apache Kafka run only when the
run's anomalies lead to a partition whose markers a coordinator skipped: a hanging
transaction there, or a transaction of an unknown or aborted outcome that wrote there (the
skipped marker left its records open until the producer's next transaction ended them, as
Apache Kafka 4.4.0 did in the matrix's smoke TV0 seed 1)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

SKIP_LINE = (
    "2026-11-28T20:59:20.659 [kafka-1-metadata-loader-event-handler] INFO "
    "kafka.coordinator.transaction.TransactionMarkerChannelManager - [Transaction Marker "
    "Channel Manager 1]: Couldn't find leader endpoint for partitions Set(events-2, copies-0) "
    "while trying to send transaction markers for writer-0, these partitions are likely "
    "deleted already and hence can be skipped\n"
)


@pytest.fixture(scope="module")
def matrix() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kafka_matrix", BENCH / "kafka_matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def run_dir(tmp_path: Path, checkers: dict[str, list[dict]], partitions: list[int]) -> Path:
    (tmp_path / "cluster" / "node-1").mkdir(parents=True)
    (tmp_path / "cluster" / "node-1" / "node.log").write_text("a line\n" + SKIP_LINE)
    verdict = {
        "status": "invalid",
        "checkers": {
            name: {"status": "invalid", "anomaly_count": len(ex), "examples": ex}
            for name, ex in checkers.items()
        },
    }
    (tmp_path / "verdict.json").write_text(json.dumps(verdict))
    (tmp_path / "history").mkdir()
    sends = [
        {
            "process": "writer-0",
            "type": "send",
            "txn": 19,
            "transactional_id": "writer-0",
            "outcome": "ok",
            "items": [{"topic": "events", "partition": p, "value": f"writer-0|19|{i}"}],
        }
        for i, p in enumerate(partitions)
    ]
    (tmp_path / "history" / "writer-0.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in sends)
    )
    return tmp_path


PARTLY_VISIBLE = [
    {"kind": "partly_visible", "evidence": {"transaction": {"writer": "writer-0", "txn": 19}}}
]


def test_a_partly_visible_transaction_that_wrote_a_skipped_partition_is_kafka_20734(
    matrix: ModuleType, tmp_path: Path
) -> None:
    run = run_dir(tmp_path, {"indeterminate_commit": PARTLY_VISIBLE}, [2, 3])
    assert matrix.skipped_markers(run) == {("writer-0", "events-2"), ("writer-0", "copies-0")}
    assert matrix.known_cause(run, {"indeterminate_commit": 1}) == "KAFKA-20734"


def test_a_transaction_that_never_wrote_a_skipped_partition_is_not_explained(
    matrix: ModuleType, tmp_path: Path
) -> None:
    run = run_dir(tmp_path, {"indeterminate_commit": PARTLY_VISIBLE}, [0, 3])
    assert matrix.known_cause(run, {"indeterminate_commit": 1}) is None


def test_a_hanging_transaction_is_explained_only_on_a_skipped_partition(
    matrix: ModuleType, tmp_path: Path
) -> None:
    on = [{"evidence": {"partition_open_transaction": {"topic": "events", "partition": 2}}}]
    off = [{"evidence": {"partition_open_transaction": {"topic": "events", "partition": 1}}}]
    assert (
        matrix.known_cause(
            run_dir(tmp_path / "a", {"hanging_transactions": on}, [2]), {"hanging_transactions": 1}
        )
        == "KAFKA-20734"
    )
    assert (
        matrix.known_cause(
            run_dir(tmp_path / "b", {"hanging_transactions": on + off}, [2]),
            {"hanging_transactions": 2},
        )
        is None
    )


def test_a_run_without_skipped_markers_has_no_known_cause(
    matrix: ModuleType, tmp_path: Path
) -> None:
    run = run_dir(tmp_path, {"indeterminate_commit": PARTLY_VISIBLE}, [2])
    (run / "cluster" / "node-1" / "node.log").write_text("nothing skipped\n")
    assert matrix.known_cause(run, {"indeterminate_commit": 1}) is None
    assert matrix.known_cause(run, {"lost_write": 1}) is None


def test_a_committed_transaction_lost_on_a_skipped_partition_is_kafka_20734(
    matrix: ModuleType, tmp_path: Path
) -> None:
    """TV2, smoke seed 3: a committed transaction's COMMIT marker skipped on events-2, its
    records there ended by the producer's next transaction (aborted): lost_write, and the
    final read skipping them (ordering names the partition)."""
    lost = [{"evidence": {"transaction": {"writer": "writer-0", "txn": 19}}}]
    skipped_read = [{"evidence": {"consumer": "final-reader", "topic": "events", "partition": 2}}]
    run = run_dir(tmp_path, {"lost_write": lost, "ordering": skipped_read}, [2, 3])
    assert matrix.known_cause(run, {"lost_write": 1, "ordering": 3}) == "KAFKA-20734"


def test_examples_that_name_no_partition_alone_explain_nothing(
    matrix: ModuleType, tmp_path: Path
) -> None:
    missing = [{"evidence": {"group": "copiers", "input": {"value": "writer-0|8|0"}}}]
    run = run_dir(tmp_path, {"consume_transform_produce": missing}, [2])
    assert matrix.known_cause(run, {"consume_transform_produce": 1}) is None
    (tmp_path / "b").mkdir()
    run = run_dir(
        tmp_path / "b",
        {"consume_transform_produce": missing, "indeterminate_commit": PARTLY_VISIBLE},
        [2],
    )
    assert matrix.known_cause(run, {"consume_transform_produce": 1, "indeterminate_commit": 1}) == (
        "KAFKA-20734"
    )


def test_a_kafka_node_error_is_listed_beside_a_valid_verdict(
    matrix: ModuleType, tmp_path: Path
) -> None:
    """A run whose checkers are valid but whose Kafka logged a programming error is shown in
    the table's list (a Kafka bug beside the verdict), with the error's type and place."""
    error = {
        "kind": "node_error",
        "exception": "java.lang.IllegalStateException",
        "where": "org.apache.kafka.coordinator.transaction.TransactionMetadata.x(T.java:1)",
    }
    (tmp_path / "verdict.json").write_text(
        json.dumps({"status": "valid", "checkers": {}, "findings": [error]})
    )
    (errors,) = matrix.node_errors(tmp_path)
    assert errors == (
        "IllegalStateException at org.apache.kafka.coordinator.transaction.TransactionMetadata"
        ".x(T.java:1)"
    )
    row = {
        "scenario": "nightly-process",
        "tv": 2,
        "seed": 2,
        "verdict": "valid",
        "invalid_checkers": {},
        "node_errors": [errors],
        "wall_s": 100.0,
        "run_dir": "r",
    }
    text = matrix.table([row])
    assert "| nightly-process | 2 | 1 | 1 | 0 | 0 | 0 | 100 s |" in text
    assert "- nightly-process TV2 seed 2: valid {}  node errors: IllegalStateException at" in text
    assert matrix.node_errors(tmp_path / "missing") == []


def test_a_write_hidden_behind_a_transaction_left_open_there_is_kafka_20734(
    matrix: ModuleType, tmp_path: Path
) -> None:
    """Another producer's committed records above the LSO a skipped marker left stuck on a
    partition are hidden, not lost (process TV2 seed 3 on 4.4.0); below that LSO, or with no
    stuck LSO, a loss stays unexplained."""

    def lost(offset: int) -> list[dict]:
        write = {"topic": "events", "partition": 2, "offset": offset}
        return [
            {
                "kind": "lost_write",
                "evidence": {"transaction": {"writer": "writer-0", "txn": 19}, "write": write},
            }
        ]

    stuck = [{"kind": "end_lso_lag", "evidence": {"topic": "events", "partition": 2, "lso": 50}}]
    # writer-0's transaction 19 wrote events-5 only: not a skipped partition for writer-0
    hidden = run_dir(tmp_path / "a", {"lost_write": lost(52), "hanging_transactions": stuck}, [5])
    assert matrix.known_cause(hidden, {"lost_write": 1, "hanging_transactions": 1}) == "KAFKA-20734"
    below = run_dir(tmp_path / "b", {"lost_write": lost(48), "hanging_transactions": stuck}, [5])
    assert matrix.known_cause(below, {"lost_write": 1, "hanging_transactions": 1}) is None
    alone = run_dir(tmp_path / "c", {"lost_write": lost(52)}, [5])
    assert matrix.known_cause(alone, {"lost_write": 1}) is None
