"""The metrics scraper against real nodes: samples land in metrics/<node>.jsonl in the
run-directory format, and a killed node only costs that node's samples."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import start_cluster
from txnchaos.harness.capture.metrics_scraper import MetricsScraper, parse_samples
from txnchaos.rundir.compact import compact_metrics

pytestmark = pytest.mark.integration


def test_parse_samples_skips_runtime_noise() -> None:
    text = (
        "# TYPE python_gc_objects_collected_total counter\n"
        'python_gc_objects_collected_total{generation="0"} 5.0\n'
        "# TYPE kafka_log_log_end_offset gauge\n"
        'kafka_log_log_end_offset{partition="0",topic="t"} 42.0\n'
    )
    assert parse_samples(text) == [
        ("kafka_log_log_end_offset", {"partition": "0", "topic": "t"}, 42.0)
    ]


def test_scraper_writes_run_dir_samples(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "cluster", brokers=2)
    try:
        endpoints = {
            f"node-{n['id']}": f"http://127.0.0.1:{n['metrics_port']}/metrics"
            for n in cluster.state()["nodes"]
        }
        scraper = MetricsScraper(tmp_path / "run", endpoints)
        assert scraper.sample_once() > 0
        cluster.kill_node(2)
        scraper.sample_once()
        assert scraper.failures == 1
        scraper.stop()
        # and the periodic thread does the same rounds on its own
        looping = MetricsScraper(tmp_path / "run2", endpoints, interval=0.1).start()
        deadline = time.monotonic() + 30
        while looping.rounds < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        looping.stop()
        assert looping.rounds >= 2
    finally:
        cluster.down()
    lines = (tmp_path / "run" / "metrics" / "node-1.jsonl").read_text().splitlines()
    sample = json.loads(lines[0])
    assert set(sample) == {"time_ns", "node", "name", "labels", "value"}
    assert any(json.loads(line)["name"] == "txnchaos_requests_total" for line in lines)
    assert compact_metrics(tmp_path / "run") is not None


@contextmanager
def _exposition(value: float) -> Iterator[str]:
    """A real HTTP endpoint serving one gauge; yields its URL."""
    body = f"# TYPE g gauge\ng {value}\n".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_endpoints_given_as_a_function_are_asked_every_round(tmp_path: Path) -> None:
    """A docker node restarted serves its metrics on a new published port."""
    with _exposition(1.0) as before, _exposition(2.0) as after:
        current = {"node-1": before}
        scraper = MetricsScraper(tmp_path / "run", lambda: current)
        assert scraper.sample_once() == 1
        current = {"node-1": after}
        assert scraper.sample_once() == 1
        scraper.close()
    lines = (tmp_path / "run" / "metrics" / "node-1.jsonl").read_text().splitlines()
    assert [json.loads(line)["value"] for line in lines] == [1.0, 2.0]
    assert scraper.failures == 0
