"""Running probes on one side: Apache Kafka's release, or our cluster.

Probes are grouped by configuration; each configuration starts one cluster of one
broker (unproxied: the probes talk to the node itself), runs its plain probes one after
another, then runs the restart probes to their ``yield``, restarts every node once, and
resumes them. A probe that fails (an exception, a state it could not reach) has the
failure as its outcome: it can only be equal to the same failure on the other side.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any, Protocol

from ..launch.base import ClusterHandle, ClusterSpec
from .catalogue import Outcome, Probe
from .context import ProbeContext

log = logging.getLogger(__name__)


class Side(Protocol):
    """A kind of cluster the probes run against."""

    name: str  # "kafka" or "ours"

    def start(self, spec: ClusterSpec, run_dir: Path) -> ClusterHandle: ...

    def label(self) -> str: ...


@dataclass
class KafkaSide:
    version: str
    name: str = "kafka"

    def start(self, spec: ClusterSpec, run_dir: Path) -> ClusterHandle:
        from ..launch.kafka.launcher import KafkaLauncher

        return KafkaLauncher(self.version).start(spec, run_dir)

    def label(self) -> str:
        return f"apache-kafka {self.version}"


@dataclass
class OurSide:
    name: str = "ours"

    def start(self, spec: ClusterSpec, run_dir: Path) -> ClusterHandle:
        from ..launch.local_launcher import LocalLauncher

        return LocalLauncher().start(spec, run_dir)

    def label(self) -> str:
        from ..launch.base import package_version

        return f"txnchaos {package_version() or '?'}"


def _json(value: Any) -> Any:
    """The outcome as it reads back from JSON (tuples become lists), so a live outcome and
    a recorded one compare alike."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _failure(exc: BaseException) -> Outcome:
    return {"probe-failed": f"{type(exc).__name__}: {exc}"[:300]}


def run_probes(
    side: Side,
    probes: Iterable[Probe],
    extra_settings: Iterable[str] = (),
    work_dir: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
    jobs: int = 1,
) -> dict[str, Outcome]:
    """Every probe's outcome on ``side`` (probes ordered by configuration), ``jobs``
    configurations (each its own cluster) at a time."""
    extra = list(extra_settings)
    own = work_dir is None
    root = Path(tempfile.mkdtemp(prefix="txnchaos-conformance-")) if own else work_dir
    assert root is not None

    def run_group(members: list[Probe]) -> dict[str, Outcome]:
        first = members[0]
        config = first.config.name
        settings = first.kafka_settings(extra) if side.name == "kafka" else first.settings(extra)
        t0 = time.monotonic()
        progress(f"{side.name}: {config} ({len(members)} probes): {' '.join(settings)}")
        spec = ClusterSpec(brokers=1, coordinators=0, settings=settings, proxied=False, seed=1)
        handle = side.start(spec, root / side.name / config)
        try:
            return _run_config(handle, members, progress)
        finally:
            handle.stop()
            progress(f"{side.name}: {config} done in {time.monotonic() - t0:.1f}s")

    groups = [list(g) for _, g in groupby(probes, key=lambda p: p.config.name)]
    out: dict[str, Outcome] = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="probes") as pool:
            for result in pool.map(run_group, groups):
                out.update(result)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    return out


SLOW_S = 5.0  # a probe taking longer is named in the progress lines


def _run_config(
    handle: ClusterHandle, probes: list[Probe], progress: Callable[[str], None]
) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    waiting: list[tuple[Probe, ProbeContext, Generator[None, None, Outcome]]] = []
    for probe in probes:
        t0 = time.monotonic()
        ctx = ProbeContext(handle, probe.base.replace(".", "-"), probe.config.level)
        try:
            result = probe.function(ctx)
            if isinstance(result, Generator):
                next(result)  # up to the restart
                waiting.append((probe, ctx, result))
                continue
            out[probe.name] = _json(result)
        except StopIteration as stop:  # a generator that returned before its yield
            out[probe.name] = _json(stop.value)
        except Exception as exc:
            log.debug("probe %s failed", probe.name, exc_info=True)
            out[probe.name] = _failure(exc)
        ctx.close()
        if time.monotonic() - t0 > SLOW_S:
            progress(f"  {probe.name} took {time.monotonic() - t0:.1f}s")
    if waiting:
        for _, ctx, _ in waiting:
            ctx.close()
        restarter = ProbeContext(handle, "restart")
        restarter.restart()
        restarter.close()
        for probe, ctx, gen in waiting:
            try:
                gen.send(None)
                out[probe.name] = _failure(RuntimeError("the probe yielded twice"))
            except StopIteration as stop:
                out[probe.name] = _json(stop.value)
            except Exception as exc:
                log.debug("probe %s failed after the restart", probe.name, exc_info=True)
                out[probe.name] = _failure(exc)
            ctx.close()
    return out
