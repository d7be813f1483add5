"""The committed_offsets checker: a copier group's final committed offset must be the one its
last committed transaction sent (or an unknown-outcome transaction's after it); a lost
committed offset and an aborted transaction's applied offset are flagged, by the reference
rule and by the Spark checker alike; no final group offsets: unknown."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis.reference import Indexes, Item, Judged, Op, RunFacts
from txnchaos.analysis.rules.committed_offsets import NO_FINAL, rule
from txnchaos.rundir.final_state import FinalState, write_final_state
from txnchaos.rundir.run_dir import FINAL_STATE_JSON

from .history_builder import OC, E, H
from .reference_support import canonical, reference_judgement, spark_judgement

NAME = "committed_offsets"


def committed_offsets(ops: list[Op], fs: FinalState | None) -> Judged:
    """The rule over ``ops`` and a final state."""
    return rule(Indexes(ops), RunFacts(final_state=fs))


def _copier(
    h: H, txn: int, offsets: dict[int, int], end: E = E.COMMIT, outcome: OC = OC.OK
) -> None:
    h.op("copier", E.BEGIN, txn=txn)
    items = [Item("in", p, o) for p, o in sorted(offsets.items())]
    h.op("copier", E.SEND_OFFSETS, *items, txn=txn, group_id="g")
    h.op("copier", end, txn=txn, outcome=outcome)


def _history() -> H:
    """Partition 0: committed 5, then 9 (9 is expected); partition 1: committed 3, then an
    abort that sent 7 (3 expected); partition 2: committed 2, then an unknown-outcome commit
    that sent 4 (2 or 4 allowed)."""
    h = H()
    h.op("copier", E.INIT, transactional_id="c")
    _copier(h, 0, {0: 5, 1: 3, 2: 2})
    _copier(h, 1, {0: 9})
    _copier(h, 2, {1: 7}, end=E.ABORT)
    _copier(h, 3, {2: 4}, outcome=OC.INFO)
    return h


def _state(offsets: dict[int, int]) -> FinalState:
    return {
        "captured_ns": 9_000_000_000,
        "partitions": [],
        "group_offsets": [
            {"group_id": "g", "topic": "in", "partition": p, "offset": o}
            for p, o in sorted(offsets.items())
        ],
    }


def test_the_last_committed_offsets_are_valid() -> None:
    h = _history()
    for unknown in (2, 4):
        judged = committed_offsets(h.ops, _state({0: 9, 1: 3, 2: unknown}))
        assert judged.unknown is None and judged.rows == []
        assert judged.checked == {"partitions": 3}


def test_a_lost_offset_and_an_aborted_one_are_flagged() -> None:
    judged = committed_offsets(_history().ops, _state({0: 5, 1: 7, 2: 2}))
    got = {
        r["evidence"]["partition"]: (
            r["evidence"].get("final_offset"),
            r["evidence"]["expected_offset"],
        )
        for r in judged.rows
    }
    assert got == {0: (5, 9), 1: (7, 3)}


def test_a_missing_offset_is_flagged_and_no_final_offsets_is_unknown() -> None:
    judged = committed_offsets(_history().ops, _state({0: 9, 1: 3}))
    assert [r["evidence"]["partition"] for r in judged.rows] == [2]
    fs = _state({})
    del fs["group_offsets"]
    assert committed_offsets(_history().ops, fs).unknown == NO_FINAL
    assert _history().counts(RunFacts(final_state=_state({0: 9, 1: 3, 2: 4}))).get(NAME) == {}


def test_spark_and_reference_agree(spark: SparkSession, tmp_path: Path) -> None:
    run = _history().write(tmp_path)
    write_final_state(run / FINAL_STATE_JSON, _state({0: 5, 1: 7, 2: 2}))
    got_spark, got_ref = spark_judgement(spark, run), reference_judgement(run)
    assert canonical(got_spark)[NAME] == canonical(got_ref)[NAME]
    assert len(got_ref[NAME][1]) == 2
