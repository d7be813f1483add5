"""A session's warm-up: judge a tiny run once, in a scratch directory, so that the JVM has
loaded, planned and compiled what every analysis runs (Catalyst's rules, each stage's generated
code, the JIT's first tier) before the run it will judge exists. ``txnchaos run`` starts its
session while the workload runs (analysis/session_start.py) and warms it up then: the real
analysis afterwards runs on compiled code. The tiny run exercises every checker: committed and
aborted transactions, a copier's offsets, reads and a final read, metric samples, a final state.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from ...rundir.compact import compact_metrics
from ...rundir.final_state import write_final_state
from ...rundir.run_dir import FINAL_STATE_JSON, append_metric_samples, write_run_info
from ...rundir.schema import EventType as E
from ...rundir.schema import MetricName as M
from ...rundir.schema import Outcome as OC
from ..model.history import Item, Op, write_history

SEC = 1_000_000_000
T0 = 1_700_000_000 * SEC


def tiny_run(root: Path) -> Path:
    """A valid run of a few transactions (history.parquet, metrics.parquet, final state)."""
    ops: list[Op] = []
    ids: dict[str, int] = {}
    clock = [T0]

    def op(process: str, kind: E, *items: Item, **fields: object) -> None:
        clock[0] += 50_000_000
        ids[process] = ids.get(process, -1) + 1
        done = {"outcome": OC.OK, "complete_ns": clock[0] + 1_000_000, **fields}
        ops.append(Op(process, ids[process], kind, clock[0], items=items, **done))  # type: ignore[arg-type]

    offset = 0
    for txn, outcome in enumerate((E.COMMIT, E.ABORT, E.COMMIT)):
        op("w", E.BEGIN, txn=txn, transactional_id="w", producer_id=1, producer_epoch=0)
        for i in range(2):
            item = Item("t", i % 2, offset, f"w|{txn}|{i}")
            op("w", E.SEND, item, txn=txn, producer_id=1, producer_epoch=0)
            offset += 1
        op("w", outcome, txn=txn)
    op("c", E.ASSIGN, Item("t", 0, 0), Item("t", 1, 0))
    op("c", E.POLL, Item("t", 0, 0, "w|0|0"), Item("t", 1, 1, "w|0|1"))
    op("x", E.BEGIN, txn=0, transactional_id="x", producer_id=2, producer_epoch=0)
    op(
        "x",
        E.SEND,
        Item("o", 0, 0, "x|0|0", source="w|0|0"),
        txn=0,
        group_id="g",
        producer_id=2,
        producer_epoch=0,
    )
    op("x", E.SEND_OFFSETS, Item("t", 0, 1), txn=0, group_id="g")
    op("x", E.COMMIT, txn=0)
    reads = [
        Item("t", 0, 0, "w|0|0"),
        Item("t", 0, 4, "w|2|0"),
        Item("t", 1, 1, "w|0|1"),
        Item("t", 1, 5, "w|2|1"),
        Item("o", 0, 0, "x|0|0"),
    ]
    op("r", E.FINAL_READ, *reads)
    end = clock[0] + SEC
    write_run_info(root, scenario="warm-up", seed=0, complete=True, started_ns=T0, ended_ns=end)
    write_history(ops, root / "history.parquet")
    samples = [
        {"time_ns": T0 + s * SEC, "name": name, "labels": labels, "value": value}
        for s in range(3)
        for name, labels, value in (
            (M.PARTITIONS_WITH_LATE_TXNS.value, {}, 0.0),
            (M.PRODUCER_ID_COUNT.value, {}, 2.0),
            (M.TXNS_COMMITTED.value, {}, float(s + 1)),
            (M.TXNS_ABORTED.value, {}, 1.0),
            (M.LAST_STABLE_OFFSET_LAG.value, {"topic": "t", "partition": "0"}, 0.0),
            (M.HARNESS_LSO.value, {"topic": "t", "partition": "0"}, float(s)),
            (M.HARNESS_HIGH_WATERMARK.value, {"topic": "t", "partition": "0"}, float(s)),
        )
    ]
    append_metric_samples(root, "node-1", samples)
    compact_metrics(root)
    partitions = [
        {"topic": t, "partition": p, "lso": n, "high_watermark": n, "log_start_offset": 0}
        for t, p, n in (("t", 0, 5), ("t", 1, 6), ("o", 0, 1))
    ]
    write_final_state(
        root / FINAL_STATE_JSON,
        {
            "captured_ns": end,
            "partitions": partitions,  # type: ignore[typeddict-item]
            "open_transactions": [],
            "group_offsets": [{"group_id": "g", "topic": "t", "partition": 0, "offset": 1}],
        },
    )
    return root


def warm_up(spark: SparkSession) -> None:
    """Judge a tiny run on ``spark`` and throw the verdict away."""
    from .pipeline import analyze

    scratch = Path(tempfile.mkdtemp(prefix="txnchaos-warm-up-"))
    try:
        analyze(tiny_run(scratch / "run"), spark=spark, write=False, archive=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
