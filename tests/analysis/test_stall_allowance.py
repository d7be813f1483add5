"""The LSO-stall rule when a node-to-node request was lost on a live connection: a cluster
that notices such a loss only when its request times out (Apache Kafka: request.timeout.ms,
30 s) gets that long more, and only then; both engines judge each case alike."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis import analyze as engines
from txnchaos.analysis.rules.hanging_transactions import (
    ABORT_CLEANUP_INTERVAL_MS,
    SAMPLING_SLACK_MS,
    stall_allowance_ms,
)
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos.analysis.verdict import Verdict
from txnchaos.rundir.run_dir import write_run_info
from txnchaos.rundir.schema import MetricName
from txnchaos_testing.synthetic import SEC, Synth, SynthConfig

from .engine_support import EXAMPLES, assert_same_verdict

CONFIG = SynthConfig(seed=3, txns_per_writer=10, consumers=1, copiers=False)
RECOVERY_MS = 30_000


def stall(synth: Synth, seconds: int) -> int:
    """Harness samples of a partition whose LSO stands still for ``seconds`` while its high
    watermark rises; returns the stall's start."""
    base = synth.cfg.start_ns
    for s in range(seconds + 1):
        t = base + s * SEC + SEC // 2
        for name, value in (
            (MetricName.HARNESS_LSO.value, 5.0),
            (MetricName.HARNESS_HIGH_WATERMARK.value, float(6 + s)),
        ):
            synth.extra_metrics.append(
                {"time_ns": t, "node": "harness", "name": name, "topic": "slow", "partition": 0,
                 "value": value}
            )  # fmt: skip
    return base + SEC // 2


def judged(
    spark: SparkSession | None, synth: Synth, run_dir: Path, recovery: int | None
) -> Verdict:
    """The run judged by the reference engine, and by Spark too (whole verdicts equal) when
    ``spark`` is given (both call the same allowance,
    rules/hanging_transactions.stall_allowance_ms)."""
    synth.write(run_dir)
    info = synth.run_info()
    if recovery is not None:
        info["cluster"] = {"flavour": "apache-kafka", "lost_request_recovery_ms": recovery}
    write_run_info(run_dir, **info)
    have = engines.analyze(run_dir, engine="reference", examples=EXAMPLES, write=False)
    if spark is not None:
        want = spark_analyze(run_dir, spark=spark, examples=EXAMPLES, write=False)
        assert_same_verdict(want, have)
    return have


def lost_markers(synth: Synth, at_ns: int, link: str = "n1->n2") -> None:
    synth.faults.append({
        "kind": "drop_request", "start": at_ns / SEC, "end": at_ns / SEC, "link": link,
        "target": {"api": "WriteTxnMarkers", "api_key": 27, "api_version": 1},
        "params": {"rule": "r"},
    })  # fmt: skip


def stalls(v: Verdict) -> int:
    return v.checkers["hanging_transactions"].counts["lso_stall"]


BASE_S = (CONFIG.transaction_timeout_ms + ABORT_CLEANUP_INTERVAL_MS + SAMPLING_SLACK_MS) // 1000


def test_a_lost_node_request_allows_the_clusters_recovery(
    spark: SparkSession, tmp_path: Path
) -> None:
    synth = Synth(CONFIG).build()
    start = stall(synth, BASE_S + 10)
    lost_markers(synth, start - SEC)
    assert stalls(judged(spark, synth, tmp_path / "kafka", RECOVERY_MS)) == 0
    # the same stall, but the cluster states no recovery time: still a stall
    assert stalls(judged(spark, synth, tmp_path / "ours", None)) == 1


def test_a_stall_without_a_lost_node_request_gets_no_more(tmp_path: Path) -> None:
    synth = Synth(CONFIG).build()
    start = stall(synth, BASE_S + 10)
    lost_markers(synth, start - SEC, link="client->n2")  # a client's loss: the client retries
    assert stalls(judged(None, synth, tmp_path / "client", RECOVERY_MS)) == 1
    longer = Synth(CONFIG).build()
    start = stall(longer, BASE_S + RECOVERY_MS // 1000 + 10)
    lost_markers(longer, start - SEC)
    assert stalls(judged(None, longer, tmp_path / "longer", RECOVERY_MS)) == 1


def test_the_allowance_looks_back_one_base_allowance() -> None:
    fault = {"kind": "blackhole", "target": "n2->n2", "start_ns": 0, "end_ns": 1_000_000_000}
    start = 20 * SEC
    assert stall_allowance_ms(20_000, [fault], start, start + SEC, 30_000) == 50_000
    assert stall_allowance_ms(18_000, [fault], start, start + SEC, 30_000) == 18_000
    assert stall_allowance_ms(20_000, [fault], start, start + SEC, 0) == 20_000
