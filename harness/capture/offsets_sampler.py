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
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...rundir.schema import MetricName
from ..workload.final_read import FinalReadError, list_ends
from .periodic import PeriodicSampler

log = logging.getLogger(__name__)


class OffsetsSampler(PeriodicSampler):
    name = "offsets-sampler"

    def __init__(
        self,
        run_dir: Path,
        bootstrap: str,
        partitions: Mapping[str, int],
        *,
        interval: float = 1.0,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(interval)
        self.security = dict(security or {})
        self.path = run_dir / "metrics" / "harness.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.bootstrap = bootstrap
        self.partitions = dict(partitions)
        self.rounds = 0
        self.failures = 0
        self.last: dict[tuple[str, int], tuple[int, int]] = {}  # (lso, high watermark)

    def sample_once(self) -> bool:
        try:
            ends = list_ends(
                self.bootstrap,
                self.partitions,
                timeout_s=max(self.interval * 5, 5),
                security=self.security,
            )
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
