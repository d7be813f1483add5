"""Samples every workload partition's LSO and high watermark about once a second,
through the Kafka protocol (ListOffsets with read_committed / read_uncommitted), so
that LSO lag and stalls can be judged on any cluster, even one without metrics.

Samples go to ``metrics/harness.jsonl`` as ``txnchaos.lso`` and
``txnchaos.high_watermark`` with ``topic``/``partition`` labels (the run-directory
contract). A round that fails (a node down) is skipped; sampling goes on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..history.schema import MetricName
from ..workload.final_read import FinalReadError, list_ends

log = logging.getLogger(__name__)


class OffsetsSampler:
    def __init__(
        self,
        run_dir: Path,
        bootstrap: str,
        partitions: Mapping[str, int],
        *,
        interval: float = 1.0,
    ) -> None:
        self.path = run_dir / "metrics" / "harness.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.bootstrap = bootstrap
        self.partitions = dict(partitions)
        self.interval = interval
        self.rounds = 0
        self.failures = 0
        self.last: dict[tuple[str, int], tuple[int, int]] = {}  # (lso, high watermark)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> bool:
        try:
            ends = list_ends(self.bootstrap, self.partitions, timeout_s=max(self.interval * 5, 5))
        except (FinalReadError, Exception) as exc:  # the cluster may be mid-fault
            self.failures += 1
            log.debug("offset sample failed: %s", exc)
            return False
        now = time.time_ns()
        lines = []
        for e in ends:
            labels = {"topic": e.topic, "partition": str(e.partition)}
            self.last[(e.topic, e.partition)] = (e.lso, e.high_watermark)
            for name, value in (
                (MetricName.HARNESS_LSO.value, e.lso),
                (MetricName.HARNESS_HIGH_WATERMARK.value, e.high_watermark),
            ):
                lines.append(
                    json.dumps(
                        {
                            "time_ns": now,
                            "node": "harness",
                            "name": name,
                            "labels": labels,
                            "value": float(value),
                        },
                        separators=(",", ":"),
                    )
                )
        with self.path.open("a") as fh:
            fh.write("\n".join(lines) + "\n")
        self.rounds += 1
        return True

    def open_partitions(self) -> int:
        """Partitions whose last sample had LSO < high watermark (open transactions)."""
        return sum(1 for lso, hw in self.last.values() if lso < hw)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> OffsetsSampler:
        self._thread = threading.Thread(target=self._loop, name="offsets-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
