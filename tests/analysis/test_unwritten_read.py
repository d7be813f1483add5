"""The unwritten_read checker: a read that returns a record no send (nor probe) of the history
put there is flagged: a value never sent, one sent only to other partitions, one sent to that
partition only with another key. Records sent where they were read are not, whether the send's
partition was recorded or not, and a probe's record matches whatever key it is read with. The
reference rule and the Spark checker agree."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis.reference import Indexes, Item, Judged, Op, RunFacts
from txnchaos.analysis.rules.unwritten_read import rule

from .history_builder import OC, E, H
from .reference_support import canonical, reference_judgement, spark_judgement

NAME = "unwritten_read"


def unwritten_read(ops: list[Op]) -> Judged:
    return rule(Indexes(ops), RunFacts())


def _send(h: H, value: str, topic: str, part: int | None, off: int | None, key: str | None) -> None:
    h.op("plain", E.SEND, Item(topic, part, off, value, key))


def _read(h: H, consumer: str, *items: Item, final: bool = False) -> None:
    h.op(consumer, E.FINAL_READ if final else E.POLL, *items)


def _history() -> H:
    h = H()
    h.txn("writer", 0, ("t", 0, 0), ("t", 1, 0))
    _send(h, "plain|-|0", "t", 0, 1, "k0")
    _send(h, "plain|-|1", "t", None, None, "k1")  # its partition never known: any of t's
    item = Item("t", 0, None, "hostile|probe|stale_epoch|1", "stale_epoch", "INVALID_EPOCH")
    h.op("hostile", E.PROBE, item, outcome=OC.FAIL, error="47")
    _read(
        h,
        "reader-b",
        Item("t", 0, 0, "writer|0|0"),
        Item("t", 0, 1, "plain|-|0", "k0"),
        Item("t", 1, 1, "plain|-|1", "k1"),
        Item("t", 0, 2, "hostile|probe|stale_epoch|1", "any-key"),  # refused_request's to judge
        Item("t", 0, 3, "torn|batch|0"),  # never sent
    )
    _read(
        h,
        "reader-a",
        Item("t", 0, 3, "torn|batch|0"),
        Item("t", 0, 0, "writer|1|0"),  # never sent either (another transaction's name)
        Item("t", 1, 2, "writer|0|0"),  # sent to t/0 only
        Item("t", 0, 1, "plain|-|0", "k9"),  # sent with key k0
        Item("t", 0, 1, "plain|-|0"),  # no key read back: not judged
    )
    _read(h, "final", Item("t", 0, 3, "torn|batch|0"), final=True)
    return h


def test_reference_flags_records_no_write_put_there() -> None:
    judged = unwritten_read(_history().ops)
    assert judged.counts == {"never_written": 2, "wrong_partition": 1, "wrong_key": 1}
    by = {(r["kind"], r["evidence"]["value"]): r["evidence"] for r in judged.rows}
    torn = by[("never_written", "torn|batch|0")]
    assert torn["read"]["process"] == "reader-b" and torn["times_read"] == 3
    assert "written" not in torn
    moved = by[("wrong_partition", "writer|0|0")]
    assert (moved["read"]["partition"], moved["written"]["partition"]) == (1, 0)
    rekeyed = by[("wrong_key", "plain|-|0")]
    assert (rekeyed["read"]["key"], rekeyed["written"]["key"]) == ("k9", "k0")


def test_records_read_where_they_were_sent_are_valid() -> None:
    h = H()
    h.txn("writer", 0, ("t", 0, 0))
    _send(h, "plain|-|1", "t", None, None, None)
    _read(h, "reader", Item("t", 0, 0, "writer|0|0", "k"), Item("t", 3, 5, "plain|-|1", "k"))
    judged = unwritten_read(h.ops)
    assert judged.rows == [] and judged.unknown is None


def test_a_history_without_reads_is_not_judged() -> None:
    h = H()
    h.txn("writer", 0, ("t", 0, 0))
    assert unwritten_read(h.ops).unknown is not None


def test_spark_and_reference_agree(spark: SparkSession, tmp_path: Path) -> None:
    run = _history().write(tmp_path)
    got_spark, got_ref = spark_judgement(spark, run), reference_judgement(run)
    assert canonical(got_spark)[NAME] == canonical(got_ref)[NAME]
    assert len(got_ref[NAME][1]) == 4
