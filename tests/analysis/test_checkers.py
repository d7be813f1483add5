"""Every checker: clean histories pass; each injected anomaly is caught with the right count.

The clean histories are judged by Spark (one shared SparkSession, conftest.py). The one-rule
cases are judged by the plain-Python reference engine, which is the checkers' specification:
Spark is held to the same verdict on every injection by test_engines_agree.py and on
generated histories by test_reference_agrees.py, so running each case through Spark again
would add minutes and no coverage.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from txnchaos_testing.synthetic import Synth

from .helpers import build, counts, judge, judge_by_reference

ALL_CHECKERS = {
    "aborted_read",
    "precommitted_read",
    "lost_write",
    "duplicate",
    "inconsistent_offsets",
    "unwritten_read",
    "ordering",
    "torn_transaction",
    "consume_transform_produce",
    "indeterminate_commit",
    "fenced_commit",
    "committed_offsets",
    "refused_request",
    "hanging_transactions",
    "metrics",
    "dual_write",
}
#: the synthetic runs have no dual writers: that checker cannot judge them
NOT_APPLICABLE = {"dual_write"}


def test_clean_history_is_valid(spark: SparkSession, tmp_path: Path) -> None:
    v = judge(spark, build(), tmp_path)
    assert set(v.checkers) == ALL_CHECKERS
    assert counts(v) == {key: {} for key in ALL_CHECKERS}
    assert {c.status for k, c in v.checkers.items() if k not in NOT_APPLICABLE} == {"valid"}
    assert {v.checkers[k].status for k in NOT_APPLICABLE} == {"unknown"}
    assert v.exit_code == 0
    assert v.stats["transactions"]["committed"] > 0


def _inject_ctp_output_ahead_and_duplicate(synth: Synth) -> str:
    return synth.inject_ctp_output_ahead(duplicate=True)


# (injection, checker, expected non-zero counts of that checker)
CASES: list[tuple[Callable[[Synth], str], str, dict[str, int]]] = [
    (Synth.inject_aborted_read, "aborted_read", {"aborted_read": 1}),
    (Synth.inject_precommitted_read, "precommitted_read", {"precommitted_read": 1}),
    (Synth.inject_lost_write, "lost_write", {"lost_write": 1}),
    # the final reader also gets the value twice in one partition: a redelivery too
    (Synth.inject_duplicate_offset, "duplicate", {"multiple_offsets": 1, "redelivered": 1}),
    (Synth.inject_duplicate_redelivery, "duplicate", {"redelivered": 1}),
    (Synth.inject_inconsistent_offset, "inconsistent_offsets", {"inconsistent_offset": 1}),
    # read by two readers: one row per value and kind
    (Synth.inject_never_written_read, "unwritten_read", {"never_written": 1}),
    (Synth.inject_wrong_partition_read, "unwritten_read", {"wrong_partition": 1}),
    (Synth.inject_wrong_key_read, "unwritten_read", {"wrong_key": 1}),
    (Synth.inject_nonmonotonic_poll, "ordering", {"non_monotonic": 1}),
    (Synth.inject_skipped_offset, "ordering", {"skipped": 1}),
    (Synth.inject_producer_reorder, "ordering", {"producer_order": 1}),
    (Synth.inject_torn_transaction, "torn_transaction", {"torn_transaction": 1}),
    (Synth.inject_ctp_duplicate_output, "consume_transform_produce", {"duplicate_output": 1}),
    (Synth.inject_ctp_missing_output, "consume_transform_produce", {"missing_output": 1}),
    (Synth.inject_ctp_output_ahead, "consume_transform_produce", {"output_ahead_of_offsets": 1}),
    # one input, two kinds: its output is ahead of the group's offsets and it has two outputs
    (
        _inject_ctp_output_ahead_and_duplicate,
        "consume_transform_produce",
        {"output_ahead_of_offsets": 1, "duplicate_output": 1},
    ),
    (Synth.inject_indeterminate_partial, "indeterminate_commit", {"partly_visible": 1}),
    # an open transaction nobody's coordinator knows: LSO lag at the end and a mismatch
    (
        Synth.inject_hanging_at_end,
        "hanging_transactions",
        {"end_lso_lag": 1, "coordinator_mismatch": 1},
    ),
    (Synth.inject_stale_open_transaction, "hanging_transactions", {"stale_open_transaction": 1}),
    (Synth.inject_coordinator_mismatch, "hanging_transactions", {"coordinator_mismatch": 1}),
    (Synth.inject_lso_stall, "hanging_transactions", {"lso_stall": 1}),
    (Synth.inject_metric_lso_lag, "metrics", {"lso_lag": 1}),
    # wrong at the end, and non-zero before any transaction could be late: two rules
    (Synth.inject_metric_late_txns, "metrics", {"late_transactions_count": 2}),
]


@pytest.mark.parametrize(
    ("inject", "checker", "expected"),
    CASES,
    ids=[c[0].__name__.removeprefix("inject_") for c in CASES],
)
def test_injected_anomaly_is_caught(
    tmp_path: Path,
    inject: Callable[[Synth], str],
    checker: str,
    expected: dict[str, int],
) -> None:
    synth = build()
    inject(synth)
    v = judge_by_reference(synth, tmp_path)
    assert counts(v)[checker] == expected
    c = v.checkers[checker]
    assert c.status == "invalid" and v.exit_code == 1
    assert c.examples and all(e["evidence"] for e in c.examples)
    assert {e["kind"] for e in c.examples} == set(expected)


def test_an_idle_partition_is_not_a_stalled_lso(tmp_path: Path) -> None:
    """The LSO stands still while a partition is idle; only the time its high watermark is above
    the LSO counts towards a stall (a short transaction after a long idle spell is fine)."""
    synth = build()
    synth.add_idle_partition_then_short_lag()
    v = judge_by_reference(synth, tmp_path)
    assert counts(v)["hanging_transactions"] == {}


def test_an_output_of_another_group_is_not_a_duplicate(tmp_path: Path) -> None:
    """Outputs count per (group, source): a second group's copy of an input that the copier's
    group copied once leaves that group with one output (outputs are matched to inputs by a
    hash of both, projections.output_key)."""
    synth = build()
    synth.inject_ctp_duplicate_output(group="another-group")
    v = judge_by_reference(synth, tmp_path)
    c = v.checkers["consume_transform_produce"]
    assert c.status == "valid", c.counts
    assert counts(v)["consume_transform_produce"] == {}


def test_unknown_outcome_commits_wholly_visible_or_invisible_are_fine(tmp_path: Path) -> None:
    synth = build()
    synth.make_indeterminate_whole(visible=True)
    synth.make_indeterminate_whole(visible=False)
    v = judge_by_reference(synth, tmp_path)
    assert counts(v)["indeterminate_commit"] == {}
    assert counts(v)["aborted_read"] == {}
    assert v.stats["transactions"].get("indeterminate") == 2


def test_an_abort_whose_records_were_purged_unsent_is_not_expected_in_the_counter(
    tmp_path: Path,
) -> None:
    """The coordinator never hears of such an abort (no EndTxn is sent), so TransactionsAborted
    may be below the number of acknowledged aborts by exactly those transactions."""
    synth = build()
    synth.add_purged_abort()
    v = judge_by_reference(synth, tmp_path)
    assert counts(v)["metrics"] == {}
    assert v.checkers["metrics"].checked.get("aborted_counter") == 1
    assert v.stats["transactions"]["aborted"] > 0


def test_evidence_of_a_lost_write_names_the_record(tmp_path: Path) -> None:
    synth = build()
    value = synth.inject_lost_write()
    v = judge_by_reference(synth, tmp_path)
    ev = v.checkers["lost_write"].examples[0]["evidence"]
    assert ev["value"] == value
    assert ev["write"]["offset"] is not None and ev["final_read_covered_partition"] is True


def test_evidence_of_a_duplicate_output_names_the_input_and_both_outputs(tmp_path: Path) -> None:
    synth = build()
    source = synth.inject_ctp_duplicate_output()
    v = judge_by_reference(synth, tmp_path)
    (ex,) = v.checkers["consume_transform_produce"].examples
    ev = ex["evidence"]
    assert "_input" not in ev
    assert ev["group"] == "copy-group"
    assert ev["input"]["value"] == source
    assert (ev["input"]["topic"], ev["input"]["partition"], ev["input"]["offset"]) == (
        synth._locate(source)
    )
    assert ev["outputs_in_final_read"] == 2
    first, last = ev["outputs_first_last"]
    assert first["value"] != last["value"]
    for out in (first, last):
        assert out["value"].startswith("copier0|") and out["loc_min"]["role"] == "r"


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    writers=st.integers(1, 4),
    partitions=st.integers(1, 4),
    consumers=st.integers(1, 3),
    abort_rate=st.sampled_from([0.0, 0.3, 0.7]),
    max_records=st.integers(1, 5),
    poll_max=st.integers(1, 7),
)
def test_generated_clean_histories_are_valid(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    writers: int,
    partitions: int,
    consumers: int,
    abort_rate: float,
    max_records: int,
    poll_max: int,
) -> None:
    synth = build(
        seed=seed,
        writers=writers,
        partitions=partitions,
        consumers=consumers,
        abort_rate=abort_rate,
        max_records_per_txn=max_records,
        poll_max=poll_max,
        txns_per_writer=8,
    )
    v = judge(spark, synth, tmp_path_factory.mktemp("prop"))
    assert counts(v) == {key: {} for key in ALL_CHECKERS}, counts(v)
