"""The refused_request checker: a hostile client's probe (a request a correct cluster must
refuse) answered ok is flagged, and so is a probe whose record any read returned, whatever
its answer; a refused probe nobody read, and one with no answer that nobody read, are not. The
reference rule and the Spark checker agree."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis.reference import Indexes, Item, Judged, Op, RunFacts
from txnchaos.analysis.rules.refused_request import rule

from .history_builder import OC, E, H
from .reference_support import canonical, reference_judgement, spark_judgement

NAME = "refused_request"


def _probe(h: H, kind: str, value: str | None, outcome: OC, error: str | None = None) -> None:
    item = Item("t", 0, None, value, kind, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    h.op("hostile", E.PROBE, item, outcome=outcome, error=error, producer_id=7, producer_epoch=0)


def refused_request(ops: list[Op]) -> Judged:
    """The rule over ``ops``."""
    return rule(Indexes(ops), RunFacts())


def _history() -> H:
    h = H()
    h.txn("writer", 0, ("t", 0, 0))
    _probe(h, "sequence_gap", "hostile|probe|sequence_gap|1", OC.FAIL, "45")  # refused: fine
    _probe(h, "sequence_gap", "hostile|probe|sequence_gap|2", OC.INFO)  # no answer, unseen: fine
    _probe(h, "commit_after_abort", None, OC.OK)  # accepted: flagged
    _probe(h, "stale_epoch", "hostile|probe|stale_epoch|3", OC.FAIL, "47")  # refused, yet read
    h.read("reader-b", ("t", 0, 2, "hostile|probe|stale_epoch|3"))
    h.read("reader-a", ("t", 0, 0, "writer|0|0"), ("t", 0, 2, "hostile|probe|stale_epoch|3"))
    h.read(
        "final", ("t", 0, 0, "writer|0|0"), ("t", 0, 2, "hostile|probe|stale_epoch|3"), final=True
    )
    return h


def test_reference_flags_an_accepted_probe_and_a_visible_one() -> None:
    judged = refused_request(_history().ops)
    assert judged.counts == {"refused_request_accepted": 1, "refused_write_visible": 1}
    assert judged.checked == {"probes": 4}
    accepted = next(r for r in judged.rows if r["kind"] == "refused_request_accepted")
    assert accepted["evidence"]["probe"]["kind"] == "commit_after_abort"
    visible = next(r for r in judged.rows if r["kind"] == "refused_write_visible")
    ev = visible["evidence"]
    assert ev["probe"]["kind"] == "stale_epoch" and ev["probe"]["outcome"] == "fail"
    assert ev["first_read"]["process"] == "reader-b"  # the earliest read
    assert ev["times_read"] == 3


def test_refused_probes_nobody_read_are_valid() -> None:
    h = H()
    _probe(h, "sequence_gap", "hostile|probe|sequence_gap|1", OC.FAIL, "45")
    h.read("reader", ("t", 0, 0, "writer|0|0"))
    assert refused_request(h.ops).rows == []


def test_spark_and_reference_agree(spark: SparkSession, tmp_path: Path) -> None:
    run = _history().write(tmp_path)
    got_spark, got_ref = spark_judgement(spark, run), reference_judgement(run)
    assert canonical(got_spark)[NAME] == canonical(got_ref)[NAME]
    assert len(got_ref[NAME][1]) == 2
