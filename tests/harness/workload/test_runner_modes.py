"""The runner's other modes: locust's web UI, and distributed master/worker."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.harness.workload.conftest import runner_cmd
from txnchaos.harness.workload.web import read_started

from .helpers import compacted

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def write_config(tmp_path: Path, topic: str) -> Path:
    cfg = tmp_path / "workload.json"
    cfg.write_text(
        json.dumps(
            {
                "topics": [{"name": topic, "partitions": 2}],
                "users": [
                    {"kind": "idempotent_producer", "topics": [topic], "count": 2, "rate": 20}
                ],
            }
        )
    )
    return cfg


@pytest.mark.parametrize("given_port", [False, True], ids=["free-port", "web-port"])
def test_web_ui_serves_on_loopback(
    wl_bootstrap: str, tmp_path: Path, uniq: str, given_port: bool
) -> None:
    cfg = write_config(tmp_path, f"web-{uniq}")
    url_file = tmp_path / "web-ui.url"
    extra = ["--web", "--duration", "6", "--web-url-file", str(url_file)]
    port = None
    if given_port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        extra += ["--web-port", str(port)]
    proc = subprocess.Popen(
        runner_cmd(cfg, wl_bootstrap, tmp_path / "run", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:
            m = re.search(r"locust web UI on (http://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "no web UI URL logged"
        assert url_file.read_text().strip() == url  # written once the UI listens
        if port is not None:
            assert url == f"http://127.0.0.1:{port}"
        body = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/stats/requests", timeout=5) as r:
                    body = r.read().decode()
                    break
            except OSError:
                time.sleep(0.2)
        assert '"stats"' in body
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert json.loads(out[out.index("{") :])["requests"] > 0


def test_distributed_master_and_worker(wl_bootstrap: str, tmp_path: Path, uniq: str) -> None:
    """The master's users run on a worker that connects late; the master says when the
    users started (its --started-file), which is after the worker connected."""
    cfg = write_config(tmp_path, f"dist-{uniq}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    started_file = tmp_path / "started"
    master = subprocess.Popen(
        runner_cmd(
            cfg,
            wl_bootstrap,
            tmp_path / "master",
            "--master",
            "--expect-workers",
            "1",
            "--master-port",
            port,
            "--duration",
            "4",
            "--started-file",
            str(started_file),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    time.sleep(1.0)  # time for a master that did not wait for its worker to start users
    assert read_started(started_file) is None
    worker_launched_ns = time.time_ns()
    worker = subprocess.Popen(
        runner_cmd(cfg, wl_bootstrap, tmp_path / "worker", "--worker", "--master-port", port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        out, _ = master.communicate(timeout=120)
        assert worker.wait(timeout=60) == 0
    finally:
        for p in (master, worker):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert master.returncode == 0
    started_ns = read_started(started_file)
    assert started_ns is not None and started_ns > worker_launched_ns
    stats = json.loads(out[out.index("{") :])
    assert stats["by_name"]["idempotent/send"]["requests"] > 0  # aggregated from the worker
    rows = compacted(tmp_path / "worker")
    procs = {r["process"] for r in rows}
    assert procs == {"idem-producer-w0-0", "idem-producer-w0-1"}
    for p in procs:
        types = [r["type"] for r in sorted(rows, key=lambda r: r["op_id"]) if r["process"] == p]
        assert types[0] == "start" and types[-1] == "stop"
