"""Reference checkers, rule by rule, on tiny hand-written histories (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.analysis.model.facts import RunFacts
from txnchaos.analysis.model.history import ITEM_KEYS, OP_KEYS
from txnchaos.analysis.model.indexes import Indexes, parse_txn
from txnchaos.analysis.reference import Item, judge
from txnchaos.analysis.rules import hanging_transactions
from txnchaos.rundir.schema import (
    ITEM_FIELDS,
    OP_FIELDS,
    EventType,
    Isolation,
    MetricName,
)
from txnchaos_testing.synthetic import Synth, SynthConfig

from .history_builder import OC, H, torn_with_unparsed_value

E = EventType


def test_ops_carry_the_schema_fields() -> None:
    assert set(OP_KEYS) == {f.name for f in OP_FIELDS}
    assert set(ITEM_KEYS) == {f.name for f in ITEM_FIELDS}


@pytest.mark.parametrize(
    ("text", "txn"),
    # as Spark's try_cast(long) reads them (measured on the installed Spark)
    [(" 12", 12), ("12\n", 12), ("+3", 3), ("-4", -4), ("07", 7), ("1.5", None),
     ("1_0", None), ("١٢", None), ("0x1", None), ("", None), ("9223372036854775808", None)],
)  # fmt: skip
def test_transaction_numbers_parse_as_spark_casts_them(text: str, txn: int | None) -> None:
    assert parse_txn(text) == txn


def test_aborted_and_never_committed_reads() -> None:
    h = H()
    (a,) = h.txn("w", 0, ("t", 0, 0), end=E.ABORT)
    (b,) = h.txn("w", 1, ("t", 0, 2), end=E.COMMIT, outcome=OC.FAIL)
    h.op("w", E.BEGIN, txn=2)
    h.op("w", E.SEND, Item("t", 0, 4, "w|2|0"), txn=2)  # never ended: open
    (d,) = h.txn("w", 3, ("t", 0, 6), end=E.COMMIT, outcome=OC.INFO)  # left to indeterminate
    h.read("c", ("t", 0, 0, a), ("t", 0, 2, b), ("t", 0, 4, "w|2|0"), ("t", 0, 6, d))
    rows = judge(h.ops)["aborted_read"].rows
    assert {r["evidence"]["value"]: r["evidence"]["transaction"]["status"] for r in rows} == {
        a: "aborted",
        b: "aborted",
        "w|2|0": "open",
    }
    assert rows[0]["evidence"]["first_read"]["process"] == "c"


def test_read_uncommitted_polls_are_not_reads() -> None:
    h = H()
    (a,) = h.txn("w", 0, ("t", 0, 0), end=E.ABORT)
    h.op("c", E.POLL, Item("t", 0, 0, a), isolation=Isolation.READ_UNCOMMITTED)
    assert h.counts()["aborted_read"] == {}


def test_precommitted_read() -> None:
    h = H()
    h.op("w", E.BEGIN, txn=0)
    h.op("w", E.SEND, Item("t", 0, 0, "w|0|0"), txn=0)
    h.read("c", ("t", 0, 0, "w|0|0"))  # completes before the commit is invoked
    h.op("w", E.COMMIT, txn=0)
    (r,) = judge(h.ops)["precommitted_read"].rows
    assert r["evidence"]["read_early_by_ms"] > 0
    h2 = H()
    (v,) = h2.txn("w", 0, ("t", 0, 0))
    h2.read("c", ("t", 0, 0, v))
    assert h2.counts()["precommitted_read"] == {}


def test_lost_write_needs_coverage() -> None:
    h = H()
    a, b = h.txn("w", 0, ("t", 0, 0), ("t", 0, 1))
    h.read("c", ("t", 0, 1, b))  # a is below the highest offset read: lost
    (c,) = h.txn("w", 1, ("t", 0, 5))  # above it, and no final read: not judged
    rows = judge(h.ops)["lost_write"].rows
    assert [r["evidence"]["value"] for r in rows] == [a]
    h.read("f", ("t", 0, 1, b), final=True)  # a final read covers the partition
    assert {r["evidence"]["value"] for r in judge(h.ops)["lost_write"].rows} == {a, c}


def test_duplicates() -> None:
    h = H()
    a, b = h.txn("w", 0, ("t", 0, 0), ("t", 0, 1))
    h.read("c", ("t", 0, 0, a))
    h.read("c", ("t", 0, 0, a))  # again, no rewind in between: redelivered
    h.op("c", E.SEEK, Item("t", 0, 0))
    h.read("c", ("t", 0, 0, a), ("t", 0, 1, b))  # after a seek: fine
    h.read("d", ("t", 0, 7, b))  # b seen at offsets 1 and 7
    assert h.counts()["duplicate"] == {"multiple_offsets": 1, "redelivered": 1}
    h.op("c", E.START)
    h.read("c", ("t", 0, 0, a))  # after a restart: fine
    assert h.counts()["duplicate"] == {"multiple_offsets": 1, "redelivered": 1}


def test_inconsistent_offset() -> None:
    h = H()
    (a,) = h.txn("w", 0, ("t", 0, 0))
    h.read("c", ("t", 0, 0, "x|-|0"))
    (r,) = judge(h.ops)["inconsistent_offsets"].rows
    lo, hi = r["evidence"]["observations"]
    assert (lo["value"], lo["role"], hi["value"], hi["role"]) == (a, "w", "x|-|0", "r")


def test_ordering() -> None:
    h = H()
    vs = h.txn("w", 0, *[("t", 0, o) for o in range(5)])
    h.read("c", ("t", 0, 0, vs[0]), ("t", 0, 2, vs[2]), ("t", 0, 1, vs[1]))  # 1 after 2
    h.read("c", ("t", 0, 4, vs[4]))  # 3 skipped
    h.op("p", E.BEGIN, txn=0)
    h.op("p", E.SEND, Item("t", 1, 9, "p|0|0"), txn=0)
    h.op("p", E.SEND, Item("t", 1, 8, "p|0|1"), txn=0)  # acked below the previous
    h.op("p", E.COMMIT, txn=0)
    o = judge(h.ops)["ordering"]
    assert o.counts == {"non_monotonic": 1, "skipped": 1, "producer_order": 1}
    (skip,) = [r for r in o.rows if r["kind"] == "skipped"]
    assert skip["evidence"]["read_from_offset"] == 0 and skip["evidence"]["read_to_offset"] == 4


def test_skipped_offsets_weigh_each_record() -> None:
    h = H()
    vs = h.txn("w", 0, *[("t", 0, o) for o in range(4)])
    h.read("c", ("t", 0, 0, vs[0]), ("t", 0, 3, vs[3]))
    h.read("f", *[("t", 0, o, vs[o]) for o in range(4)], final=True)
    (r,) = judge(h.ops)["ordering"].rows
    assert (r["kind"], r["weight"]) == ("skipped", 2)


def test_torn_transaction() -> None:
    h = H()
    a, b, c = h.txn("w", 0, ("t", 0, 0), ("t", 0, 1), ("t", 0, 2))
    (d,) = h.txn("w", 1, ("t", 0, 3))
    h.read("c", ("t", 0, 0, a), ("t", 0, 2, c), ("t", 0, 3, d))  # b missing: torn
    h.read("e", ("t", 0, 0, a), ("t", 0, 1, b))  # stops inside: not torn
    (r,) = judge(h.ops)["torn_transaction"].rows
    assert r["evidence"]["reader"] == "c"
    assert (r["evidence"]["records_in_partition"], r["evidence"]["records_returned"]) == (3, 2)


def test_indeterminate_commit_partly_visible() -> None:
    h = H()
    a, b = h.txn("w", 0, ("t", 0, 0), ("t", 0, 1), outcome=OC.INFO)
    h.read("f", ("t", 0, 0, a), final=True)
    (r,) = judge(h.ops)["indeterminate_commit"].rows
    assert r["evidence"]["visible_sample"] == [a] and r["evidence"]["invisible_sample"] == [b]
    h2 = H()
    a, b = h2.txn("w", 0, ("t", 0, 0), ("t", 0, 1), outcome=OC.INFO)
    h2.read("f", ("t", 0, 0, a), ("t", 0, 1, b), final=True)
    assert h2.counts()["indeterminate_commit"] == {}


def _copier(h: H, txn: int, outputs: list[tuple[int, str]], position: int) -> None:
    """A copier transaction: outputs (offset in t-out/0, source value), then offsets."""
    h.op("k", E.BEGIN, txn=txn)
    for i, (off, src) in enumerate(outputs):
        item = Item("t-out", 0, off, f"k|{txn}|{i}", source=src)
        h.op("k", E.SEND, item, txn=txn, group_id="g")
    h.op("k", E.SEND_OFFSETS, Item("t", 0, position), txn=txn, group_id="g")
    h.op("k", E.COMMIT, txn=txn)


def test_consume_transform_produce() -> None:
    h = H()
    a, b, c = h.txn("w", 0, ("t", 0, 0), ("t", 0, 1), ("t", 0, 2))
    # a copied twice, b not at all (both below the position 2), c copied though not committed
    _copier(h, 0, [(0, a), (1, a), (2, c)], 2)
    out = [("t-out", 0, o, f"k|0|{o}") for o in range(3)]
    h.read("f", ("t", 0, 0, a), ("t", 0, 1, b), ("t", 0, 2, c), *out, final=True)
    ctp = judge(h.ops)["consume_transform_produce"]
    assert ctp.counts == {"missing_output": 1, "duplicate_output": 1, "output_ahead_of_offsets": 1}
    dup = next(r for r in ctp.rows if r["kind"] == "duplicate_output")["evidence"]
    assert dup["input"]["value"] == a
    assert [o["value"] for o in dup["outputs_first_last"]] == ["k|0|0", "k|0|1"]


def test_hanging_transactions_from_the_final_state_and_samples() -> None:
    open_txn = {"topic": "t", "partition": 0, "producer_id": 7, "start_ns": 0}
    state = {
        "captured_ns": 2_000_000 * 1_000_000,  # 2,000 s after the open transaction began
        "partitions": [{"topic": "t", "partition": 0, "lso": 3, "high_watermark": 5}],
        "open_transactions": [open_txn],
        "coordinator_transactions": [],
    }
    lso, hw = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value
    samples = [
        {"time_ns": s * 1_000_000_000, "name": n, "topic": "t", "partition": 0, "value": v}
        for s in range(100)
        for n, v in ((lso, 3.0), (hw, 3.0 + s))
    ]
    facts = RunFacts(final_state=state, metrics=samples, transaction_timeout_ms=60_000)
    assert hanging_transactions.rule(Indexes([]), facts).counts == {
        "end_lso_lag": 1,
        "stale_open_transaction": 1,
        "coordinator_mismatch": 1,
        "lso_stall": 1,
    }
    assert hanging_transactions.rule(Indexes([]), RunFacts()).unknown is not None


def test_a_stall_is_timed_from_when_the_lso_fell_behind() -> None:
    """60 s idle (LSO = high watermark), then behind: only the time behind counts."""
    lso, hw = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value

    def samples(behind_s: int) -> list[dict[str, object]]:
        return [
            {"time_ns": s * 1_000_000_000, "name": n, "topic": "t", "partition": 0, "value": v}
            for s in range(60 + behind_s)
            for n, v in ((lso, 3.0), (hw, 3.0 if s < 60 else 4.0 + s))
        ]

    short = RunFacts(metrics=samples(10), transaction_timeout_ms=10_000)
    assert hanging_transactions.rule(Indexes([]), short).counts["lso_stall"] == 0
    long = hanging_transactions.rule(
        Indexes([]), RunFacts(metrics=samples(40), transaction_timeout_ms=10_000)
    )
    assert long.counts["lso_stall"] == 1
    (stall,) = long.rows
    assert stall["evidence"]["from_ns"] == 60 * 1_000_000_000


def test_the_time_a_node_was_down_does_not_count_towards_a_stall() -> None:
    """40 s behind (25 s allowed), 20 s of it with a node restarting or paused (overlapping
    windows counted once): not a stall; a link fault is no node down time."""
    lso, hw = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value
    samples = [
        {"time_ns": s * 1_000_000_000, "name": n, "topic": "t", "partition": 0, "value": v}
        for s in range(41)
        for n, v in ((lso, 3.0), (hw, 4.0 + s))
    ]

    def fault(kind: str, target: str, start_s: int, end_s: int) -> dict[str, object]:
        return {
            "kind": kind,
            "target": target,
            "start_ns": start_s * 10**9,
            "end_ns": end_s * 10**9,
        }

    down = [fault("restart", "node 1001", 2, 15), fault("pause", "node 2", 10, 22)]
    facts = RunFacts(metrics=samples, transaction_timeout_ms=10_000, faults=down)
    assert hanging_transactions.rule(Indexes([]), facts).counts["lso_stall"] == 0
    link = [fault("delay", "client->n1", 2, 22)]
    facts = RunFacts(metrics=samples, transaction_timeout_ms=10_000, faults=link)
    (stall,) = hanging_transactions.rule(Indexes([]), facts).rows
    assert stall["evidence"]["nodes_down_ms"] == 0
    short = [fault("restart", "node 1001", 2, 8)]
    facts = RunFacts(metrics=samples, transaction_timeout_ms=10_000, faults=short)
    (stall,) = hanging_transactions.rule(Indexes([]), facts).rows
    assert stall["evidence"]["nodes_down_ms"] == 6_000


def test_gates_without_reads() -> None:
    h = H()
    h.txn("w", 0, ("t", 0, 0))
    j = judge(h.ops)
    for name in ("aborted_read", "precommitted_read", "lost_write", "duplicate", "torn_transaction",
                 "indeterminate_commit", "consume_transform_produce"):  # fmt: skip
        assert j[name].unknown is not None, name
    assert j["ordering"].unknown is None and j["inconsistent_offsets"].unknown is None


def test_a_clean_synthetic_run_directory_is_valid(tmp_path: Path) -> None:
    Synth(SynthConfig(seed=3)).build().write(tmp_path)
    j = judge(tmp_path)
    assert {n: r.counts for n, r in j.items() if any(r.counts.values())} == {}
    # the simulator has no dual writers (no database contents to compare)
    assert {n: r.unknown for n, r in j.items() if r.unknown and n != "dual_write"} == {}


def test_a_transaction_returned_whole_is_not_torn_by_a_value_not_naming_it() -> None:
    j = judge(torn_with_unparsed_value().ops)
    (r,) = j["torn_transaction"].rows
    assert r["evidence"]["transaction"] == {"writer": "w", "txn": 1}
    assert j["ordering"].counts["skipped"] == 1


def test_a_history_written_and_read_back_is_judged_alike(tmp_path: Path) -> None:
    h = torn_with_unparsed_value()
    h.read("c", ("t", 0, 4, "w|1|1"))  # and a redelivery
    by_ops = {n: (j.unknown, j.rows) for n, j in judge(h.ops).items()}
    by_dir = {n: (j.unknown, j.rows) for n, j in judge(h.write(tmp_path)).items()}
    assert by_dir == by_ops
