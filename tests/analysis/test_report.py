"""report.html: faults as one band per nemesis action in every chart, legends, one time axis
shared by every chart, anomalies linked to their evidence, the verdict in words, and a file
that stays small however long the history."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark_session import TestSessions
from txnchaos.analysis.fault_actions import group_faults
from txnchaos.analysis.report import render_report
from txnchaos.analysis.report.charts import OP_COLOURS
from txnchaos.analysis.report_series import MAX_BUCKETS, quantile_of_bins
from txnchaos.analysis.spark.pipeline import analyze
from txnchaos.analysis.verdict import VALID, CheckerVerdict, Verdict
from txnchaos_testing.synthetic import Synth, SynthConfig

SEC = 1_000_000_000
CHARTS = ("faults", "throughput", "users", "latency", "lso", "open-txns", "anomalies")
DATA_CHARTS = CHARTS[1:]


def _figures(html: str) -> dict[str, str]:
    """chart id -> its <figure> element's text."""
    found = re.findall(r'<figure class="chart" id="chart-([\w-]+)"(.*?)</figure>', html, re.S)
    return dict(found)


def _xticks(svg: str) -> list[tuple[str, str]]:
    """(x position, label) of each x tick of a chart."""
    ticks = re.findall(
        r'<g id="xtick_\d+">.*?<text [^>]*x="([\d.]+)"[^>]*>([^<]*)</text>', svg, re.S
    )
    return [(x, label) for x, label in ticks]


def _report(spark: SparkSession, tmp: Path, invalid: bool) -> tuple[Synth, Verdict, str]:
    synth = Synth(SynthConfig()).build()
    if invalid:
        synth.inject_aborted_read()
        synth.inject_lost_write()
    synth.write(tmp)
    verdict = analyze(tmp, spark=spark)
    return synth, verdict, (tmp / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def reports(
    spark_sessions: TestSessions, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Synth, Verdict, str]]:
    spark = spark_sessions.current()
    return {
        name: _report(spark, tmp_path_factory.mktemp(name), name == "invalid")
        for name in ("valid", "invalid")
    }


@pytest.mark.parametrize("name", ["valid", "invalid"])
def test_one_band_per_scheduled_action_in_every_chart(
    reports: dict[str, tuple[Synth, Verdict, str]], name: str
) -> None:
    synth, _, html = reports[name]
    scheduled = len(synth.schedule)
    assert scheduled == 4 and len(synth.faults) > 20  # per-request records, few actions
    figures = _figures(html)
    assert list(figures) == list(CHARTS)
    for chart in DATA_CHARTS:
        bands = re.findall(rf'id="{chart}-band-(\d+)"', figures[chart])
        assert sorted(map(int, bands)) == list(range(1, scheduled + 1)), chart
        assert f'data-bands="{scheduled}"' in figures[chart]
    faults = figures["faults"]
    for part in ("scheduled", "applied"):
        assert len(re.findall(rf'id="faults-{part}-\d+"', faults)) == scheduled
    rows = re.findall(r'<tr id="fault-(\d+)">(.*?)</tr>', html, re.S)
    assert [int(n) for n, _ in rows] == list(range(1, scheduled + 1))
    delay = next(text for _, text in rows if ">delay<" in text)
    assert "client-&gt;n1" in delay and "api Produce; jitter_ms 50; ms 200" in delay
    assert re.search(r"\d+ requests; applied_ms [\d.]+ to [\d.]+", delay)
    assert "{" not in "".join(text for _, text in rows)  # parameters as text, not JSON


@pytest.mark.parametrize("name", ["valid", "invalid"])
def test_every_chart_shares_one_time_axis(
    reports: dict[str, tuple[Synth, Verdict, str]], name: str
) -> None:
    figures = _figures(reports[name][2])
    ranges = {
        re.search(r'data-xmin="([^"]+)" data-xmax="([^"]+)"', f).groups() for f in figures.values()
    }  # type: ignore[union-attr]
    assert len(ranges) == 1
    lo, hi = (float(x) for x in ranges.pop())
    assert lo <= 0 < hi
    ticks = {chart: _xticks(f) for chart, f in figures.items()}
    first = ticks["faults"]
    assert len(first) >= 3
    assert all(t == first for t in ticks.values()), ticks  # same labels at the same x


def test_legends_name_every_fault_kind_and_operation_type(
    reports: dict[str, tuple[Synth, Verdict, str]],
) -> None:
    synth, verdict, html = reports["invalid"]
    figures = _figures(html)
    legend = re.search(r'<g id="faults-legend">(.*?)</g>\s*</g>\s*<defs>', figures["faults"], re.S)
    assert legend is not None
    for kind in {a["kind"] for a in synth.schedule}:
        assert f">{kind}</text>" in legend.group(1)
    types = set(verdict.stats["ops_by_type"])
    assert types <= set(OP_COLOURS)
    throughput = figures["throughput"]
    assert 'id="throughput-legend"' in throughput
    for t in types:
        assert f">{t}</text>" in throughput
    assert all(f'id="{c}-legend"' in figures[c] for c in CHARTS)


def test_anomalies_link_to_their_evidence(
    reports: dict[str, tuple[Synth, Verdict, str]],
) -> None:
    _, verdict, html = reports["invalid"]
    timeline = _figures(html)["anomalies"]
    links = re.findall(r'<a xlink:href="#(ex-[\w-]+)"', timeline)
    timed = [e for c in verdict.checkers.values() for e in c.examples if e.get("time_ns")]
    assert len(links) == len(timed) >= 2
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    assert set(links) <= ids
    for target in links:
        assert re.search(rf'<details class="example" id="{target}" open>', html)
    assert set(re.findall(r'href="#(checker-[\w-]+)"', html)) <= ids
    # bands link to their fault rows
    assert set(re.findall(r'xlink:href="#(fault-\d+)"', html)) <= ids


def test_invalid_verdict_opens_with_what_went_wrong(
    reports: dict[str, tuple[Synth, Verdict, str]],
) -> None:
    lead = re.search(r'<p class="lead (\w+)" id="summary">(.*?)</p>', reports["invalid"][2], re.S)
    assert lead is not None and lead.group(1) == "invalid"
    text = lead.group(2)
    assert text.startswith("This run is INVALID")
    assert "aborted_read found 1" in text and "lost_write found 1" in text
    assert "partition t/" in text and ("active" in text)
    lead = re.search(r'<p class="lead (\w+)" id="summary">(.*?)</p>', reports["valid"][2], re.S)
    assert lead is not None and lead.group(2).startswith("No checker found an anomaly")


def test_report_is_self_contained(reports: dict[str, tuple[Synth, Verdict, str]]) -> None:
    for _, _, html in reports.values():
        assert "<script" not in html
        assert not re.findall(r"https?://(?!www\.w3\.org/)", html)


def _verdict(seconds: int, ops_per_sec: int, **extra: object) -> Verdict:
    """A verdict as the pipeline makes it, for a run of ``seconds``, without Spark."""
    t0 = 1_800_000_000 * SEC
    types = list(OP_COLOURS)
    ops = [
        {"sec": t0 // SEC + s, "type": t, "outcome": "ok" if s % 7 else "fail", "ops": ops_per_sec,
         "rows": ops_per_sec, "lat_sum": 1, "lat_n": 1, "lat_max": 1}
        for s in range(seconds) for t in types
    ]  # fmt: skip
    bucket = max(1, -(-seconds // MAX_BUCKETS))
    buckets = range(0, seconds // bucket)
    schedule = [
        {"at": at, "kind": kind, "duration": 30.0, "node": 1 if kind == "kill" else None,
         "rule": {"link": "client->n1", "ms": 50} if kind == "delay" else {}, "origin": "random"}
        for at, kind in ((100.0, "delay"), (seconds / 2, "kill"))
    ]  # fmt: skip
    faults = [
        {"start_ns": t0 + (100_000 + i * 10) * 1_000_000,
         "end_ns": t0 + (100_050 + i * 10) * 1_000_000,
         "target": "client->n1", "kind": "delay",
         "detail": json.dumps({"target": {}, "params": {"rule": "action-0", "applied_ms": 50}})}
        for i in range(2000)
    ]  # fmt: skip
    return Verdict(
        run_dir="/runs/long",
        status=VALID,
        checkers={
            "lost_write": CheckerVerdict("lost_write", VALID, "Lost write: ...", {}, 0),
        },
        stats={"events": seconds * ops_per_sec * len(types), "ops": 1},
        series={
            "ops": ops,
            "anomalies": [],
            "lso_lag": {
                "source": "harness",
                "series": {"t/0": [(t0 / SEC + b * bucket, float(b % 5)) for b in buckets]},
            },
            "t0_ns": t0,
            "bucket_s": bucket,
            "latency": [
                {
                    "t_ns": t0 + b * bucket * SEC,
                    "type": t,
                    "n": 5,
                    "p50_ms": 2.0,
                    "p95_ms": 9.0,
                    "p99_ms": 30.0,
                }
                for b in buckets
                for t in types
            ],
            "open_txns": [{"t_ns": t0 + b * bucket * SEC, "open": b % 9} for b in buckets],
            "schedule": schedule,
        },
        faults=faults,
        run={"scenario": "long", "started_ns": t0, "workload_started_ns": t0},
        **extra,  # type: ignore[arg-type]
    )


def test_a_long_history_gives_a_report_of_the_same_size_as_a_short_one() -> None:
    short = render_report(_verdict(120, 5))
    day = render_report(_verdict(6 * 3600, 5_000))
    # bounded by buckets x series, not by events: 10,000 times the operations, under 3 times
    # the bytes (more buckets hold failures), and well under a few MB
    assert len(day.encode()) < 2_000_000
    assert len(day) < 3 * len(short)
    for chart in ("throughput", "latency"):
        figure = _figures(day)[chart]
        # one path per series; no series has more points than buckets
        paths = re.findall(rf'<g id="{chart}-[\w-]+">\s*<path d="([^"]*)"', figure)
        assert paths
        assert max(p.count("L") for p in paths) <= 2 * MAX_BUCKETS
    # 2,000 delayed requests of one action: one band, one row
    assert len(re.findall(r'id="throughput-band-\d+"', day)) == 2
    assert "2000 requests; applied_ms 50" in day


def test_notes_are_shown() -> None:
    html = render_report(_verdict(60, 1, notes=["history/w3.jsonl: a torn last line skipped"]))
    notes = re.search(r'<div class="notes" id="notes">(.*?)</div>', html, re.S)
    assert notes is not None and "a torn last line skipped" in notes.group(1)
    assert 'id="notes"' not in render_report(_verdict(60, 1))


def test_records_without_rule_ids_are_grouped_by_the_action_they_fit() -> None:
    """Runs recorded before rule ids named actions: kind, target and window decide; a
    node's restart at the end of its kill is the kill healing; records no action explains
    are merged while they keep coming."""
    t0 = 1_000 * SEC
    schedule = [
        {"at": 1.0, "kind": "delay", "duration": 2.0, "rule": {"link": "client->*"}},
        {"at": 5.0, "kind": "kill", "duration": 3.0, "node": 2},
    ]

    def rec(kind: str, at: float, end: float, target: str, detail: object = None) -> dict:
        return {
            "start_ns": t0 + int(at * SEC), "end_ns": t0 + int(end * SEC), "kind": kind,
            "target": target, "detail": json.dumps(detail or {"target": {}, "params": {}}),
        }  # fmt: skip

    node2 = {"target": {"node": 2}, "params": {"launcher": "local"}}
    faults = [rec("delay", 1 + i / 10, 1.2 + i / 10, "client->n1") for i in range(15)]
    faults += [rec("kill", 5.01, 5.05, "node 2", node2), rec("restart", 8.0, 9.5, "node 2", node2)]
    faults += [rec("reset", 20 + i / 2, 20 + i / 2, "n1->n2") for i in range(4)]
    actions = group_faults(schedule, faults, t0)
    assert [(a.kind, a.records, a.origin) for a in actions] == [
        ("delay", 15, "action"),
        ("kill", 2, "action"),
        ("reset", 4, "unscheduled"),
    ]
    kill = actions[1]
    assert kill.applied == (t0 + int(5.01 * SEC), t0 + int(9.5 * SEC))
    assert kill.effect == "2 records (kill, restart)"


def test_quantiles_from_log_bins_are_within_six_percent() -> None:
    import math

    values = [1_000 * 1.03**i for i in range(400)]  # 1 µs .. ~130 ms
    bins: dict[int, int] = {}
    for v in values:
        b = math.floor(math.log10(v) * 20)
        bins[b] = bins.get(b, 0) + 1
    for q in (0.5, 0.95, 0.99):
        exact = sorted(values)[math.ceil(q * len(values)) - 1]
        assert abs(quantile_of_bins(bins, q) / exact - 1) < 0.065


def test_load_numbers_match_the_history(reports: dict[str, tuple[Synth, Verdict, str]]) -> None:
    """Committed transactions per second and each operation type's p50/p95/p99 (verdict.json
    and the report's table) agree with the ops the history holds."""
    import math

    synth, verdict, html = reports["valid"]
    commits = [o for o in synth.ops if o["type"] == "commit" and o["outcome"] == "ok"]
    secs = [o["invoke_ns"] // SEC for o in commits]
    assert verdict.stats["committed_txn_per_s"] == round(
        len(commits) / (max(secs) - min(secs) + 1), 2
    )
    latency = verdict.stats["latency_ms"]
    for typ in ("send", "commit", "poll"):
        done = sorted(
            o["complete_ns"] - o["invoke_ns"]
            for o in synth.ops
            if o["type"] == typ and o.get("complete_ns") is not None
        )
        assert latency[typ]["n"] == len(done)
        for q in (50, 95, 99):
            exact = max(done[math.ceil(q / 100 * len(done)) - 1], 1) / 1e6
            assert abs(latency[typ][f"p{q}_ms"] / exact - 1) < 0.13, (typ, q)
    table = re.search(r'<table class="latency" id="latency-percentiles">(.*?)</table>', html, re.S)
    row = f'<td>commit</td><td class="num">{latency["commit"]["n"]:,}</td>'
    assert table is not None and row in table.group(1)
    assert f'id="committed-txn-per-s">{verdict.stats["committed_txn_per_s"]:,.1f}' in html


def test_nemesis_errors_are_in_the_verdict_and_the_report(
    reports: dict[str, tuple[Synth, Verdict, str]],
) -> None:
    _, verdict, html = reports["valid"]
    assert verdict.status == VALID and verdict.nemesis is not None
    counts = {k: v for k, v in verdict.nemesis.items() if k != "errors"}
    assert counts == {
        "scheduled": 4,
        "applied": 4,
        "failed": 0,
        "not_reached": 0,
        "heals_retried": 1,
        "unhealed": 0,
    }
    assert [(e["action"], e["kind"], e["step"]) for e in verdict.nemesis["errors"]] == [
        (1, "kill", "heal")
    ]
    assert "nemesis: 4 fault(s) scheduled, 4 applied, 1 heal(s) retried, 1 error" in (
        verdict.summary()
    )
    box = re.search(r'<div class="notes" id="nemesis">(.*?)</div>', html, re.S)
    assert box is not None and "restart of node 2 timed out after 90 s" in box.group(1)
    assert "But the nemesis reported 1 error" in html
