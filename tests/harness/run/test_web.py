"""`txnchaos run --web`: locust's web UI serves the users' statistics while the scenario
runs, the run ends with its verdict, and nothing is left running (issue 26: the
orchestrator imported locust, and gevent's monkey-patching broke its running threads)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import child_commands

from .test_run_smoke import ROOT, alive, node_pids

SCENARIO = """\
name: web
seed: 3
duration: 15
cluster: {launcher: local, brokers: 1, coordinators: 0, proxied: false}
workload:
  topics:
    - {name: events, partitions: 2}
  users:
    - {kind: transactional_producer, name: writer, count: 2, topics: [events],
       records_per_txn: 3, abort_probability: 0.2, rate: 10}
    - {kind: read_committed_consumer, name: reader, topics: [events], group_id: readers}
final: {quiescence_timeout: 30, read_timeout: 60}
expect: {verdict: valid}
"""

URL_LINE = re.compile(r"locust web UI: (http://\S+)")


class Output:
    """Reads a process's output in a thread; ``url`` is set once the UI's URL is printed."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.url: str | None = None
        self.url_printed = threading.Event()
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)
            m = URL_LINE.search(line)
            if m and self.url is None:
                self.url = m.group(1)
                self.url_printed.set()
        self.closed.set()
        self.url_printed.set()  # wake a waiter: the output ended without a URL

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def complete(stats: dict[str, Any]) -> bool:
    """A ``/stats/requests`` answer shows the producers' sends and commits and the
    consumer's requests."""
    shown = {(s["method"], s["name"]) for s in stats["stats"] if s["num_requests"]}
    return {("txn", "send"), ("txn", "commit")} <= shown and any(m == "consumer" for m, _ in shown)


def txnchaos(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_web_ui_shows_the_users_while_the_run_goes_on(tmp_path: Path) -> None:
    scenario = tmp_path / "web.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"
    # the plain rules judge it: the web UI, not the engine, is under test here
    proc = txnchaos("run", str(scenario), "--out", str(out), "--web", "--engine", "reference")
    output = Output(proc)
    try:
        assert output.url_printed.wait(timeout=180)
        url = output.url
        assert url is not None, "".join(output.lines)
        assert url.startswith("http://127.0.0.1:")  # loopback by default

        status, page = get(url + "/")
        assert status == 200 and "<html" in page.lower()

        # the stats endpoint shows every user, then their requests as they complete
        stats: dict[str, Any] = {"user_count": 0, "stats": []}
        while not (stats["user_count"] == 3 and complete(stats)):  # 2 writers, 1 reader
            assert proc.poll() is None, f"the run ended before the UI showed requests: {stats}"
            status, body = get(url + "/stats/requests")
            assert status == 200
            stats = json.loads(body)
            time.sleep(0.2)
        assert stats["state"] in ("spawning", "running"), stats["state"]

        code = proc.wait(timeout=540)
    finally:
        if proc.poll() is None:  # a failure above: let the run stop its cluster first
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = output.text()
    assert code == 0, text
    assert "the harness failed" not in text and "KeyError" not in text, text
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "valid", verdict
    info = json.loads((out / "run.json").read_text())
    assert info["complete"] is True and info["web_ui"] == url

    # nothing is left running: nodes, the workload process, the UI's port
    assert not [p for p in node_pids(out) if alive(p)]
    assert not [c for c in child_commands(os.getpid()) if "workload.runner" in c]
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port))):
        pass


def test_web_options_are_checked_before_a_cluster_starts(tmp_path: Path) -> None:
    scenario = tmp_path / "web.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "run"

    proc = txnchaos("run", str(scenario), "--out", str(out), "--web-port", "8089")
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--web-host and --web-port need --web" in text, text

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        proc = txnchaos("run", str(scenario), "--out", str(out), "--web", "--web-port", port)
        text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in text, text

    proc = txnchaos(
        "run", str(scenario), "--out", str(out), "--web", "--web-host", "no-such-host.invalid"
    )
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--web-host no-such-host.invalid" in text, text
    assert not out.exists()  # refused up front: no run directory, no cluster
