"""The fenced_commit checker: a commit acknowledged to an instance after a newer instance of
its transactional id initialised is flagged (a zombie's commit), by the reference rule and by
the Spark checker alike; a new instance that initialised only after the commit, one of
another transactional id, a failed commit, and a two-phase-commit id are not."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis.reference import Indexes, Item, RunFacts

from .history_builder import OC, E, H
from .reference_support import canonical, reference_judgement, spark_judgement

NAME = "fenced_commit"


def _zombie_history() -> H:
    """writer-a (id "w") begins a transaction and pauses; writer-b inits "w" and commits;
    writer-a then commits: acknowledged (the bug). Around it, harmless cases."""
    h = H()
    h.op("writer-a", E.INIT, transactional_id="w")
    h.op("writer-a", E.BEGIN, txn=0, transactional_id="w")
    h.op("writer-a", E.SEND, Item("t", 0, 0, "writer-a|0|0"), txn=0, transactional_id="w")
    h.op("writer-b", E.INIT, transactional_id="w")
    h.op("writer-b", E.BEGIN, txn=0, transactional_id="w")
    h.op("writer-b", E.SEND, Item("t", 0, 1, "writer-b|0|0"), txn=0, transactional_id="w")
    h.op("writer-b", E.COMMIT, txn=0, transactional_id="w")
    h.op("writer-a", E.COMMIT, txn=0, transactional_id="w")  # the zombie's commit
    # another id: its own instance, committing after writer-b's init of "w" (fine)
    h.op("other", E.INIT, transactional_id="o")
    h.op("other", E.BEGIN, txn=0, transactional_id="o")
    h.op("other", E.SEND, Item("t", 1, 0, "other|0|0"), txn=0, transactional_id="o")
    h.op("other", E.COMMIT, txn=0, transactional_id="o")
    # "x": the newer instance initialises after the older one's commit (fine), and a
    # zombie commit that failed (fine)
    h.op("x-1", E.INIT, transactional_id="x")
    h.op("x-1", E.BEGIN, txn=0, transactional_id="x")
    h.op("x-1", E.COMMIT, txn=0, transactional_id="x")
    h.op("x-1", E.BEGIN, txn=1, transactional_id="x")
    h.op("x-2", E.INIT, transactional_id="x")
    h.op("x-1", E.COMMIT, txn=1, transactional_id="x", outcome=OC.FAIL)
    # a two-phase-commit id (KIP-939): a new instance completes the old one's transaction
    h.op("dual-1", E.INIT, transactional_id="d")
    h.op("dual-1", E.BEGIN, txn=0, transactional_id="d")
    h.op("dual-1", E.PREPARE, txn=0, transactional_id="d")
    h.op("dual-2", E.INIT, transactional_id="d")
    h.op("dual-1", E.COMMIT, txn=0, transactional_id="d")
    h.read("reader", ("t", 0, 1, "writer-b|0|0"), final=True)
    return h


def test_reference_flags_only_the_zombie_commit() -> None:
    h = _zombie_history()
    from txnchaos.analysis.rules.fenced_commit import rule

    judged = rule(Indexes(h.ops), RunFacts())
    assert judged.counts == {NAME: 1}
    (row,) = judged.rows
    ev = row["evidence"]
    assert ev["transactional_id"] == "w"
    assert ev["commit"]["process"] == "writer-a"
    assert ev["newer_init"]["process"] == "writer-b"
    assert judged.checked == {"commits": 4}


def test_a_later_init_of_the_same_process_is_its_own_instance() -> None:
    """A process that re-initialises (a reset producer) commits as its newest instance."""
    h = H()
    h.op("w-0", E.INIT, transactional_id="w")
    h.op("w-1", E.INIT, transactional_id="w")
    h.op("w-0", E.INIT, transactional_id="w")  # w-0 comes back and fences w-1
    h.op("w-0", E.BEGIN, txn=0, transactional_id="w")
    h.op("w-0", E.COMMIT, txn=0, transactional_id="w")
    assert h.counts().get(NAME, {}) == {}


def test_spark_and_reference_agree(spark: SparkSession, tmp_path: Path) -> None:
    run = _zombie_history().write(tmp_path)
    got_spark, got_ref = spark_judgement(spark, run), reference_judgement(run)
    assert canonical(got_spark)[NAME] == canonical(got_ref)[NAME]
    assert len(got_ref[NAME][1]) == 1
