"""The verdict's findings: a client crash recorded by the workload becomes a ``client_crash``
finding with the faults around it and the command that repeats the run, in both engines; it
leaves the cluster's status alone and makes the exit code 1."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis import analyze as engines
from txnchaos.analysis.findings import BEFORE_S, finding_line
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos.rundir.client_crashes import write_crash
from txnchaos.rundir.client_hangs import write_hang
from txnchaos_testing.synthetic import Synth, SynthConfig

from .engine_support import EXAMPLES, assert_same_verdict

SEC = 1_000_000_000
MESSAGE = (
    "rdkafka_txnmgr.c:1007: rd_kafka_txn_handle_AddPartitionsToTxn: "
    "Assertion `rk->rk_eos.txn_req_cnt > 0' failed."
)


def _crash(synth: Synth, at_ns: int) -> dict[str, object]:
    return {
        "process": "w0",
        "kind": "transactional_producer",
        "user_index": 0,
        "time_ns": at_ns,
        "signal": "SIGABRT",
        "exit_code": -6,
        "library": "librdkafka",
        "library_version": "2.16.0",
        "binding_version": "2.16.1",
        "message": MESSAGE,
        "log_tail": ["python: " + MESSAGE],
        "log": "logs/clients/w0.log",
        "in_flight": [{"process": "w0", "type": "begin", "op_id": 9, "txn": 4, "invoke_ns": at_ns}],
        "restarted_as": "w3",
    }


def test_a_client_crash_is_a_finding_with_the_faults_around_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    synth = Synth(SynthConfig(seed=3, txns_per_writer=10, consumers=1, copiers=False)).build()
    run = synth.write(tmp_path / "run")
    (run / "scenario.yaml").write_text("name: synthetic\n")
    # during the response drop (action 3), after the delay (action 0) was healed
    drop = [line for line in synth.nemesis_log if line["action"] == 3]
    at = (drop[0]["end"] + drop[1]["start"]) / 2
    write_crash(run, _crash(synth, int(at * SEC)))

    want = spark_analyze(run, spark=spark, examples=EXAMPLES, write=False)
    have = engines.analyze(run, engine="reference", examples=EXAMPLES, write=False)
    assert_same_verdict(want, have)

    (f,) = have.findings
    assert have.status == "valid" and have.exit_code == 1
    assert f["kind"] == "client_crash" and f["process"] == "w0" and f["signal"] == "SIGABRT"
    assert f["message"] == MESSAGE and f["library_version"] == "2.16.0"
    assert f["in_flight"][0]["type"] == "begin" and f["restarted_as"] == "w3"
    assert f["repeat"] == f"txnchaos run {run / 'scenario.yaml'}"
    assert [x["action"] for x in f["faults_active"]] == [3]
    assert f["faults_active"][0]["target"] == "client->n0"
    healed_at = {}  # a heal (or its retry) that worked; an instant fault (a crash) at once
    for line in synth.nemesis_log:
        instant = not synth.schedule[line["action"]]["duration"]
        if not line["error"] and (line["step"] != "apply" or instant):
            healed_at[line["action"]] = line["end"]
    healed = [a for a, t in healed_at.items() if 0 < at - t <= BEFORE_S]
    assert healed  # the run's earlier faults
    assert sorted(x["action"] for x in f["faults_before"]) == sorted(healed)
    origin = synth.run_info()["workload_started_ns"] / SEC
    assert f["at_s"] == round(at - origin, 3)
    line = finding_line(f)
    assert line.startswith("client crash: w0 (transactional_producer, librdkafka 2.16.0)")
    assert "faults active: drop_response on client->n0" in line
    summary = have.summary()
    assert summary.splitlines()[0].startswith("verdict: VALID, 1 FINDING (client crash)")
    assert f"repeat: txnchaos run {run / 'scenario.yaml'}" in summary


def test_a_client_hang_is_a_finding_with_the_faults_around_its_call(tmp_path: Path) -> None:
    """A librdkafka call the workload gave up on (client-hangs/) is a client_hang finding:
    the faults around the call's invocation, the cluster's status left alone, exit code 1.
    (findings.py builds the findings for both engines; the reference engine judges here.)"""
    synth = Synth(SynthConfig(seed=3, txns_per_writer=10, consumers=1, copiers=False)).build()
    run = synth.write(tmp_path / "run")
    (run / "scenario.yaml").write_text("name: synthetic\n")
    drop = [line for line in synth.nemesis_log if line["action"] == 3]
    invoked = (drop[0]["end"] + drop[1]["start"]) / 2  # during the response drop
    record = {
        "process": "copier-0",
        "kind": "eos_copier",
        "user_index": 0,
        "time_ns": int((invoked + 45) * SEC),
        "call": "send_offsets_to_transaction",
        "timeout_s": 30.0,
        "waited_s": 45.0,
        "invoke_ns": int(invoked * SEC),
        "op_id": 41,
        "type": "send_offsets",
        "txn": 7,
        "transactional_id": "copier-0",
        "library": "librdkafka",
        "library_version": "2.16.0",
        "binding_version": "2.16.1",
        "issue": "librdkafka#5456",
        "message": "send_offsets_to_transaction(timeout=30 s) did not return after 45.0 s",
    }
    write_hang(run, record)

    v = engines.analyze(run, engine="reference", examples=EXAMPLES, write=False)
    (f,) = v.findings
    assert v.status == "valid" and v.exit_code == 1
    assert f["kind"] == "client_hang" and f["process"] == "copier-0" and f["op_id"] == 41
    assert f["call"] == "send_offsets_to_transaction" and f["issue"] == "librdkafka#5456"
    assert [x["action"] for x in f["faults_active"]] == [3]
    origin = synth.run_info()["workload_started_ns"] / SEC
    assert f["at_s"] == round(invoked - origin, 3)
    assert f["repeat"] == f"txnchaos run {run / 'scenario.yaml'}"
    line = finding_line(f)
    assert line.startswith("client hang: copier-0 (eos_copier, librdkafka 2.16.0)")
    assert "faults active: drop_response on client->n0" in line
    assert v.summary().splitlines()[0].startswith("verdict: VALID, 1 FINDING (client hang)")


def test_a_run_without_crashes_has_no_findings(tmp_path: Path) -> None:
    synth = Synth(SynthConfig(seed=3, txns_per_writer=5, consumers=1, copiers=False)).build()
    v = engines.analyze(synth.write(tmp_path / "run"), engine="reference", write=False)
    assert v.findings == [] and v.exit_code == 0
