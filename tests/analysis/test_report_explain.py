"""What the person who filed the bug reads first in report.html: which configuration ran, a
record hidden behind a stuck LSO told apart from one truly lost, the operator command that
clears a hanging transaction (never for one whose commit was decided), what a reproduction's
defended configurations would have done, readable times and the records' keys."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import yaml

from txnchaos.analysis import analyze as engines
from txnchaos.analysis.report.explain import (
    configuration_of,
    readable,
    stuck_partitions,
    visibility,
)
from txnchaos_testing.synthetic import Synth, SynthConfig

SEC = 1_000_000_000
REPRO = {
    "name": "produce-after-abort",
    "cluster": {"settings": {"transaction.version": 0}},
    "repro": {
        "report": "KAFKA-14402",
        "design_section": "KIP-890",
        "symptom": "a record after its abort marker",
        "configuration": "tv0",
        "configurations": {
            "tv0": {
                "description": "no defense (transaction.version 0)",
                "settings": {"transaction.version": 0},
                "expect": {"verdict": "invalid", "anomalies": ["hanging_transactions"]},
            },
            "tv2": {
                "description": "every transaction has its own epoch; the late write is fenced",
                "settings": {"transaction.version": 2},
                "expect": {"verdict": "valid"},
            },
        },
    },
}


def _text(html: str, ident: str) -> str:
    m = re.search(rf'id="{ident}".*?</(?:table|div)>', html, re.S)
    assert m, ident
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", m.group(0))))


def test_the_header_names_the_configuration_and_the_defence() -> None:
    run = {"scenario": "produce-after-abort", "seed": 7, "cluster_kind": "local"}
    c = configuration_of(run, REPRO)
    assert (c.entry, c.report, c.configuration) == ("produce-after-abort", "KAFKA-14402", "tv0")
    assert c.description == "no defense (transaction.version 0)"
    assert c.predicted == "invalid (hanging_transactions)"
    assert c.cluster == "txnchaos (version unknown), transaction.version 0"  # as configured
    assert c.defences == [
        (
            "tv2",
            "every transaction has its own epoch; the late write is fenced",
            "txnchaos repro produce-after-abort --config tv2",
        )
    ]
    kafka = {**run, "cluster": {"flavour": "apache-kafka", "version": "4.1.1"}}
    kafka["transaction_version"] = 2
    assert configuration_of(kafka, {}).cluster == "apache-kafka 4.1.1, transaction.version 2"


def test_a_committed_transaction_is_never_offered_to_the_abort_tool() -> None:
    state = {
        "partitions": [
            {"topic": "t", "partition": 0, "lso": 10, "high_watermark": 12},
            {"topic": "t", "partition": 1, "lso": 5, "high_watermark": 5},
        ],
        "open_transactions": [
            {
                "topic": "t",
                "partition": 0,
                "producer_id": 7,
                "producer_epoch": 3,
                "first_offset": 10,
            },
            {
                "topic": "t",
                "partition": 0,
                "producer_id": 8,
                "producer_epoch": 0,
                "first_offset": 11,
            },
        ],
        "coordinator_transactions": [
            {
                "transactional_id": "w8",
                "producer_id": 8,
                "producer_epoch": 0,
                "state": "PrepareCommit",
                "partitions": [{"topic": "t", "partition": 0}],
            },
        ],
    }
    stuck = stuck_partitions(state, "HOST:PORT")
    assert list(stuck) == [("t", 0)]  # t/1 is not stuck
    (by_offset, explicit), *more = stuck[("t", 0)].commands
    assert not more  # producer 8's commit was decided: aborting it would lose committed data
    assert by_offset == (
        "txnchaos transactions abort --bootstrap HOST:PORT --topic t --partition 0 "
        "--start-offset 10"
    )
    assert explicit.endswith("--producer-id 7 --producer-epoch 3 --coordinator-epoch -1")
    words = stuck[("t", 0)].sentence(0)
    assert "stuck at 10, 2 offsets below the high watermark 12" in words
    assert "not lost" in words and "decided to commit w8" in words
    lso = {("t", 0): 10, ("t", 1): 5}
    hidden = visibility({"write": {"topic": "t", "partition": 0, "offset": 11}}, stuck, lso)
    lost = visibility({"write": {"topic": "t", "partition": 1, "offset": 3}}, stuck, lso)
    assert hidden is not None and hidden.startswith("hidden, not lost: offset 11")
    assert lost == "lost: offset 3 is below t/1's LSO 5, readable, and no reader returned it"


def test_times_are_readable() -> None:
    t0 = 1_795_846_265 * SEC
    shown = readable({"time_ns": t0 + 1_500_000_000, "write": {"t": t0}, "offset": 12}, t0)
    assert shown == {
        "time_ns": "+1.500 s (06:11:06.500 UTC)",
        "write": {"t": "+0.000 s (06:11:05.000 UTC)"},
        "offset": 12,
    }


def _hide(synth: Synth, value: str) -> dict[str, Any]:
    """Stick ``value``'s partition's LSO at its offset, held by an open transaction."""
    topic, partition, offset = next(
        (i["topic"], i["partition"], i["offset"])
        for o in synth.ops
        if o["type"] == "send" and o["outcome"] == "ok"
        for i in o["items"]
        if i["value"] == value
    )
    p = next(
        p
        for p in synth.final_state["partitions"]
        if (p["topic"], p["partition"]) == (topic, partition)
    )
    p["lso"] = offset
    synth.final_state["open_transactions"].append(
        {"topic": topic, "partition": partition, "producer_id": 4242, "producer_epoch": 1,
         "first_offset": offset, "start_ns": synth.final_state["captured_ns"] - 10 * SEC},
    )  # fmt: skip
    return p


def test_the_report_tells_hidden_records_from_lost_ones(tmp_path: Path) -> None:
    synth = Synth(SynthConfig(seed=4, txns_per_writer=10, consumers=1, copiers=False)).build()
    hidden_value = synth.inject_lost_write()
    part = _hide(synth, hidden_value)
    run = synth.write(tmp_path / "run")
    (run / "scenario.yaml").write_text(yaml.safe_dump(REPRO))
    verdict = engines.analyze(run, engine="reference", write=True)
    assert verdict.status == "invalid"
    html = (run / "report.html").read_text()

    header = _text(html, "configuration")
    assert "reproduction produce-after-abort (KAFKA-14402)" in header
    assert "configuration tv0 : no defense (transaction.version 0)" in header
    assert "predicted invalid (hanging_transactions)" in header and "seed 4" in header
    reader = _text(html, "reader")
    name = f"{part['topic']}/{part['partition']}"
    assert f"{name}: the last stable offset (LSO) is stuck at {part['lso']}" in reader
    assert "its coordinator does not know it" in reader
    assert (
        f"txnchaos transactions abort --bootstrap HOST:PORT --topic {part['topic']} "
        f"--partition {part['partition']} --start-offset {part['lso']}"
    ) in reader
    assert "--producer-id 4242 --producer-epoch 1 --coordinator-epoch -1" in reader
    defences = _text(html, "defences")
    assert "tv2 : every transaction has its own epoch" in defences
    assert "txnchaos repro produce-after-abort --config tv2" in defences

    example = _text(html, "ex-lost_write-0")
    assert "what a reader sees hidden, not lost" in example
    assert f"value {hidden_value} key" in example  # the record's key, from the history
    assert re.search(r"commit_invoked_ns \+\d+\.\d{3} s \(\d\d:\d\d:\d\d\.\d{3} UTC\)", example)
