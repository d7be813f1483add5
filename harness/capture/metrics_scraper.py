"""Scrapes every node's Prometheus ``/metrics`` once a second into the run directory.

Each sample becomes one JSON line in ``metrics/<node>.jsonl``:
``{"time_ns", "node", "name", "labels": {...}, "value"}`` (the run-directory
contract in ``rundir/run_dir.py``). Lines are flushed after every scrape,
so a crashed run keeps what it scraped. A node that does not answer (killed,
paused) is skipped for that round and counted in ``failures``; scraping goes on.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from prometheus_client.parser import text_string_to_metric_families

from .periodic import PeriodicSampler

#: the exporters' own process and runtime metrics (the JMX exporter's jvm_/jmx_ on Apache
#: Kafka's nodes), never read by the analysis
SKIPPED_PREFIXES = ("python_", "process_", "jvm_", "jmx_", "txnchaos_request_seconds")

Endpoints = Mapping[str, str] | Callable[[], Mapping[str, str]]
"""Node name -> ``http://host:port/metrics``, or a function giving the current ones."""


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample in a Prometheus text exposition."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(SKIPPED_PREFIXES) or sample.name.endswith("_created"):
                continue
            out.append((sample.name, dict(sample.labels), float(sample.value)))
    return out


class MetricsScraper(PeriodicSampler):
    name = "metrics-scraper"

    def __init__(
        self,
        run_dir: Path,
        endpoints: Endpoints,
        *,
        interval: float = 1.0,
        timeout: float = 0.8,
    ) -> None:
        super().__init__(interval)
        self.directory = run_dir / "metrics"
        self.directory.mkdir(parents=True, exist_ok=True)
        # A function is asked every round: a restarted container has a new published port.
        self._endpoints = endpoints
        self.timeout = timeout
        self.rounds = 0
        self.failures = 0
        self._files: dict[str, TextIO] = {}

    @property
    def endpoints(self) -> dict[str, str]:
        """The endpoints to scrape now (none, counted as a failure, if the function fails)."""
        source = self._endpoints
        if not callable(source):
            return dict(source)
        try:
            return dict(source())
        except Exception:
            self.failures += 1
            return {}

    def sample_once(self) -> int:
        """One round over every node; returns the number of samples written."""
        written = 0
        for node, url in self.endpoints.items():
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as response:
                    text = response.read().decode("utf-8", errors="replace")
            except (OSError, urllib.error.URLError):
                self.failures += 1
                continue
            now = time.time_ns()
            fh = self._files.get(node)
            if fh is None:
                fh = self._files[node] = (self.directory / f"{node}.jsonl").open("a")
            lines = [
                json.dumps(
                    {"time_ns": now, "node": node, "name": n, "labels": labels, "value": v},
                    separators=(",", ":"),
                )
                for n, labels, v in parse_samples(text)
            ]
            if lines:
                fh.write("\n".join(lines) + "\n")
                fh.flush()
            written += len(lines)
        self.rounds += 1
        return written

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()
