"""Users with a native client in processes of their own (``workload.isolation: process``): a
client process that dies from a signal is a client crash — recorded, its user restarted — while
the other users keep running; ``shared`` keeps every user in the workload process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.workload.conftest import run_workload, runner_cmd
from txnchaos.harness.workload.crash_report import crash_message, signal_name
from txnchaos.rundir.client_crashes import read_crashes

from .helpers import compacted, happened, jsonl_lines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: what librdkafka 2.16.0 printed when it aborted a nightly run (seed 795841258)
ASSERTION = (
    "python: rdkafka_txnmgr.c:1007: rd_kafka_txn_handle_AddPartitionsToTxn: "
    "Assertion `rk->rk_eos.txn_req_cnt > 0' failed."
)


def test_the_crash_message_is_the_assertion_line() -> None:
    log = [
        "%5|1795846282.618|REQTMOUT|writer-1#producer-6| [thrd:TxnCoordinator]: Timed out ...",
        ASSERTION,
    ]
    assert crash_message(log, -6) == ASSERTION.removeprefix("python: ")
    assert crash_message(["nothing useful"], -11) == "killed by SIGSEGV"
    assert crash_message([], 3) == "exited with code 3"
    assert signal_name(-6) == "SIGABRT" and signal_name(0) is None


def _child_pid(run: Path, process: str, timeout_s: float = 240.0) -> int:
    """The pid of the isolated child running ``process`` for the run in ``run`` (its command
    line names both: another run on the machine, a nightly mix or another test, may have a
    ``writer-0`` of its own)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                b"txnchaos.harness.workload.isolated_child" in argv
                and process.encode() in argv
                and str(run).encode() in argv
            ):
                return int(entry.name)
        time.sleep(0.1)
    raise AssertionError(f"no isolated child for {process}")


def _commits(run: Path, process: str) -> list[dict[str, Any]]:
    return [
        r
        for r in jsonl_lines(run)
        if r["process"] == process and r["type"] == "commit" and r.get("outcome") == "ok"
    ]


def _wait(what: str, cond: Any, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _config(topic: str, isolation: str) -> dict[str, Any]:
    return {
        "topics": [{"name": topic, "partitions": 2}],
        "isolation": isolation,
        "users": [
            {
                "kind": "transactional_producer",
                "name": "writer",
                "count": 2,
                "topics": [topic],
                "records_per_txn": 2,
                "partitions_per_txn": 1,
                "abort_probability": 0,
                "transactional_id": "iso-{index}",
                "rate": 10,
            }
        ],
    }


@pytest.mark.timeout(900)  # the waits are on events; on a busy machine they take long
def test_a_client_process_that_aborts_is_a_crash_and_its_user_restarts(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    run = tmp_path / "run"
    cfg = tmp_path / "workload.json"
    cfg.write_text(json.dumps(_config(f"iso-{uniq}", "process")))
    with (tmp_path / "runner.log").open("w") as err:
        proc = subprocess.Popen(
            # a backstop only: the test stops the runner once it has seen what it waits for
            runner_cmd(cfg, wl_bootstrap, run, "--duration", "1200", "--seed", "7"),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        victim = _child_pid(run, "writer-0")
        for writer in ("writer-0", "writer-1"):
            _wait(f"{writer}'s first commits", lambda w=writer: len(_commits(run, w)) >= 3)
        crashed_at = time.time_ns()
        os.kill(victim, signal.SIGABRT)  # what librdkafka's rd_assert does to its process
        _wait("the crash record", lambda: read_crashes(run)[0])
        _wait("the successor's commits", lambda: len(_commits(run, "writer-2")) >= 3)
        writer1_before = len(_commits(run, "writer-1"))
        _wait("writer-1 going on", lambda: len(_commits(run, "writer-1")) > writer1_before + 3)
    finally:
        proc.send_signal(signal.SIGTERM)  # the runner's clean stop
        out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, (tmp_path / "runner.log").read_text()

    (record,) = read_crashes(run)[0]
    assert record["process"] == "writer-0" and record["kind"] == "transactional_producer"
    assert record["signal"] == "SIGABRT" and record["exit_code"] == -6
    assert record["library"] == "librdkafka" and record["library_version"]
    assert record["message"] == "killed by SIGABRT"
    assert record["user_index"] == 0 and record["restarted_as"] == "writer-2"
    assert record["time_ns"] >= crashed_at
    assert record["log"] == "logs/clients/writer-0.log"

    rows = compacted(run)
    stop = [r for r in rows if r["process"] == "writer-0" and r["type"] == "stop"]
    assert stop[-1]["outcome"] == "info" and "client crash (SIGABRT)" in stop[-1]["error"]
    # the successor is the same user: index 0, so the same transactional.id (it fenced writer-0)
    first = next(r for r in rows if r["process"] == "writer-2" and r["type"] == "start")
    assert first["transactional_id"] == "iso-0"
    # writer-1 never stopped: one START, one clean STOP, commits before and after the crash
    w1 = [r for r in rows if r["process"] == "writer-1"]
    assert [r["type"] for r in w1].count("start") == 1
    assert [r["outcome"] for r in w1 if r["type"] == "stop"] == ["ok"]
    commits = [r["complete_ns"] for r in w1 if r["type"] == "commit" and r["outcome"] == "ok"]
    assert min(commits) < crashed_at < max(commits)
    stats = json.loads(out)
    assert stats["by_name"]["txn/client crash"]["failures"] == 1


def _both_committed(run: Path) -> bool:
    return happened(run, "commit", "writer-0") and happened(run, "commit", "writer-1")


def test_shared_isolation_runs_every_user_in_the_workload_process(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    run = tmp_path / "run"
    run_workload(_config(f"shared-{uniq}", "shared"), run, wl_bootstrap, 4, until=_both_committed)
    assert not (run / "logs" / "clients").exists()  # no user had a process of its own
    assert len(_commits(run, "writer-0")) > 0 and len(_commits(run, "writer-1")) > 0
