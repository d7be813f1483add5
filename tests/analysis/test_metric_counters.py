"""The transaction counters rule of the metrics checker when the counting node restarts: what its
process counted after its last scrape is lost, so a kill is no anomaly; an under-count that
no restart explains still is. Both engines judge each case, and their verdicts agree whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from txnchaos.analysis import analyze as engines
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos.analysis.verdict import Verdict
from txnchaos.rundir.run_dir import write_run_info
from txnchaos.rundir.schema import MetricName
from txnchaos_testing.synthetic import Synth, SynthConfig

from .engine_support import EXAMPLES, assert_same_verdict

CONFIG = SynthConfig(seed=5, txns_per_writer=20, consumers=1, copiers=False)


def _both(spark: SparkSession, synth: Synth, run_dir: Path) -> Verdict:
    synth.write(run_dir)
    want = spark_analyze(run_dir, spark=spark, examples=EXAMPLES, write=False)
    have = engines.analyze(run_dir, engine="reference", examples=EXAMPLES, write=False)
    assert_same_verdict(want, have)
    return have


def _counted(synth: Synth, name: MetricName) -> float:
    """What the old rule read: every increase of the counter, a drop read as a restart."""
    total, prev = 0.0, None
    rows = [r for r in synth.metric_rows if r["name"] == name.value]
    for r in sorted(rows, key=lambda r: r["time_ns"]):
        total += r["value"] if prev is None or r["value"] < prev else r["value"] - prev
        prev = r["value"]
    return total


def _acknowledged_commits(synth: Synth) -> int:
    return sum(o["type"] == "commit" and o["outcome"] == "ok" for o in synth.ops)


def test_a_coordinator_kill_that_loses_unscraped_commits_is_valid(
    spark: SparkSession, tmp_path: Path
) -> None:
    synth = Synth(CONFIG).build()
    synth.kill_counting_node()
    # the kill did lose commits: the counter's increases fall short of the acknowledged commits
    assert _counted(synth, MetricName.TXNS_COMMITTED) < _acknowledged_commits(synth)
    v = _both(spark, synth, tmp_path)
    metrics = v.checkers["metrics"]
    assert metrics.status == "valid", metrics.examples
    assert metrics.checked["committed_counter"] == 1  # the upper bound
    assert metrics.checked["committed_counter_lower"] == 1  # over commits after the restart
    assert metrics.checked["aborted_counter"] == 1
    (note,) = [n for n in metrics.notes if n.startswith("counting nodes restarted")]
    assert "n0 until" in note
    after = int(note.split("after ")[-1].split(": ")[1].split(" of ")[0])
    assert after > 0  # the lower bound still covers the commits made after the restart


@pytest.mark.parametrize("after_restart", [False, True])
def test_an_undercount_no_restart_explains_is_flagged(
    spark: SparkSession, tmp_path: Path, after_restart: bool
) -> None:
    """Without a kill, one commit short is an anomaly; after a kill, so is a last process
    that counts fewer commits than were invoked after it came back."""
    synth = Synth(CONFIG).build()
    if after_restart:
        synth.kill_counting_node(missed_after_restart=True)
    else:
        synth.inject_counter_undercount()
    v = _both(spark, synth, tmp_path)
    metrics = v.checkers["metrics"]
    assert metrics.counts["transaction_counters"] == 1
    (ex,) = metrics.examples
    assert ex["evidence"]["metric"] == MetricName.TXNS_COMMITTED.value
    low, high = ex["evidence"]["expected_range"]
    got = ex["evidence"].get("reported_by_last_processes", ex["evidence"]["reported_total"])
    assert got == low - 1 and high == _acknowledged_commits(synth)
    assert ("counted_after_ns" in ex["evidence"]) == after_restart


def test_a_node_not_scraped_after_its_restart_leaves_the_lower_bounds_unchecked(
    tmp_path: Path,
) -> None:
    """Its last process's counts are unknown: only the upper bound is checked."""
    synth = Synth(CONFIG).build()
    synth.kill_counting_node()
    restarted = max(f["end"] for f in synth.faults if f["kind"] == "restart") * 1e9
    counters = {MetricName.TXNS_COMMITTED.value, MetricName.TXNS_ABORTED.value}
    synth.metric_rows = [
        r for r in synth.metric_rows if r["name"] not in counters or r["time_ns"] < restarted
    ]
    v = engines.analyze(synth.write(tmp_path), engine="reference", write=False)
    metrics = v.checkers["metrics"]
    assert metrics.status == "valid"
    assert metrics.checked["committed_counter"] == 1
    assert "committed_counter_lower" not in metrics.checked
    assert "aborted_counter" not in metrics.checked
    assert sum("lower bound not checked: n0 not scraped" in n for n in metrics.notes) == 2


KAFKA_CLUSTER = {
    "flavour": "apache-kafka",
    "version": "4.4.0",
    "metrics_unavailable": {
        MetricName.TXNS_COMMITTED.value: "Apache Kafka counts no committed transactions",
        MetricName.TXNS_ABORTED.value: "Apache Kafka counts no aborted transactions",
    },
}


def _without_counters(synth: Synth, run_dir: Path) -> None:
    """As an Apache Kafka cluster's nodes are scraped: no transaction counters, and the
    launcher's reason in run.json."""
    counters = {MetricName.TXNS_COMMITTED.value, MetricName.TXNS_ABORTED.value}
    synth.metric_rows = [r for r in synth.metric_rows if r["name"] not in counters]
    synth.write(run_dir)
    write_run_info(run_dir, **{**synth.run_info(), "cluster": KAFKA_CLUSTER})


def _judged_by_both(spark: SparkSession, run_dir: Path) -> Verdict:
    want = spark_analyze(run_dir, spark=spark, examples=EXAMPLES, write=False)
    have = engines.analyze(run_dir, engine="reference", examples=EXAMPLES, write=False)
    assert_same_verdict(want, have)
    return have


def test_a_metric_the_cluster_lacks_makes_the_checker_unknown_with_the_reason(
    spark: SparkSession, tmp_path: Path
) -> None:
    synth = Synth(CONFIG).build()
    _without_counters(synth, tmp_path)
    metrics = _judged_by_both(spark, tmp_path).checkers["metrics"]
    assert metrics.status == "unknown", metrics
    assert metrics.reason is not None
    assert "TransactionsCommitted: Apache Kafka counts no committed transactions" in metrics.reason
    assert "judged without anomalies: PartitionsWithLateTransactionsCount" in metrics.reason
    assert metrics.checked.get("lso_lag_partitions")  # the rules it has metrics for still ran


def test_a_violated_rule_is_invalid_even_with_a_metric_missing(
    spark: SparkSession, tmp_path: Path
) -> None:
    synth = Synth(CONFIG).build()
    synth.inject_metric_lso_lag()
    _without_counters(synth, tmp_path)
    metrics = _judged_by_both(spark, tmp_path).checkers["metrics"]
    assert metrics.status == "invalid" and metrics.counts["lso_lag"] == 1


@pytest.mark.parametrize("complete", [True, False])
def test_a_run_cut_short_leaves_the_lower_bounds_unchecked(
    spark: SparkSession, tmp_path: Path, complete: bool
) -> None:
    """A run cut short (the workload crashed, Ctrl-C) has no final phase: its last commits
    come after the nodes' last scrape.  That under-count is no anomaly when run.json says the
    run did not complete, and still one when it says it did."""
    synth = Synth(CONFIG).build()
    counters = {MetricName.TXNS_COMMITTED.value, MetricName.PRODUCER_ID_COUNT.value}
    last_commit = max(
        o["complete_ns"] for o in synth.ops if o["type"] == "commit" and o["outcome"] == "ok"
    )
    cut = last_commit - 3_000_000_000  # the scraper's last sample: 3 s before the last commit
    synth.metric_rows = [
        r for r in synth.metric_rows if r["name"] not in counters or r["time_ns"] < cut
    ]
    synth.run_info = lambda: {**Synth.run_info(synth), "complete": complete}  # type: ignore[method-assign]
    v = _both(spark, synth, tmp_path)
    metrics = v.checkers["metrics"]
    if complete:
        assert metrics.counts["transaction_counters"] == 1, metrics.examples
        return
    assert metrics.status == "valid", metrics.examples
    assert "committed_counter_lower" not in metrics.checked
    assert metrics.checked["committed_counter"] == 1  # the upper bound still holds
    assert any(n.startswith("the run was cut short") for n in metrics.notes)


def test_sends_recorded_without_their_producer_id_leave_the_upper_bound_unchecked(
    spark: SparkSession, tmp_path: Path
) -> None:
    """librdkafka names its producer id only in a statistics snapshot taken after the init:
    a run stopped within its first second records sends without one.  The nodes count that
    producer id; the upper bound of ProducerIdCount, which sums the ids the history names,
    cannot bound it (a web UI STOP after the first commit was judged invalid for it)."""
    synth = Synth(CONFIG).build()
    first = next(o["process"] for o in synth.ops if o["type"] == "send")
    for o in synth.ops:
        if o["process"] == first and o["type"] == "send":
            o.pop("producer_id", None)
    v = _both(spark, synth, tmp_path)
    metrics = v.checkers["metrics"]
    assert metrics.status == "valid", metrics.examples
    assert any(n.startswith("ProducerIdCount's upper bound is not checked") for n in metrics.notes)
