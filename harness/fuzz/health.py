"""Is a node still well after a batch of fuzz cases?

Well means: its process is alive, a fresh connection gets answers to ApiVersions and
Metadata within a timeout, its resident memory is within the bound, and the part of
its log written since the last look holds no traceback and no ERROR line.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import decode_response, encode_request, request_class
from ..launch.local import is_our_node
from .target import Connection, Node

API_VERSIONS = (18, 3)
METADATA = (3, 12)
PROBLEM = re.compile(r"^Traceback|^\S+ \S+ node-\d+ (ERROR|CRITICAL) ")
"""A traceback, or a line the node logged at ERROR or above (its log format: see
``txnchaos node``)."""


@dataclass
class Health:
    node: Node
    alive: bool = True
    answering: bool = True
    rss_mb: float | None = None
    problem: str = ""
    """What failed (empty: nothing)."""

    @property
    def ok(self) -> bool:
        return self.alive and self.answering


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` in MiB (None: gone or not readable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _requests() -> bytes:
    versions = make(
        request_class(*API_VERSIONS),
        client_software_name="txnchaos-fuzz-health",
        client_software_version="1.0",
    )
    metadata = make(
        request_class(*METADATA),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return encode_request(1, versions, "fuzz-health") + encode_request(2, metadata, "fuzz-health")


HEALTH_REQUESTS = _requests()


async def answers(node: Node, timeout: float) -> str:
    """'' when a fresh connection gets valid ApiVersions and Metadata answers in time,
    else what went wrong."""

    async def ask() -> str:
        conn = await Connection.open(node)
        try:
            conn.writer.write(HEALTH_REQUESTS)
            _, versions = decode_response(*API_VERSIONS, await conn.read_frame())
            if versions.error_code != 0:
                return f"ApiVersions answered error {versions.error_code}"
            correlation, _ = decode_response(*METADATA, await conn.read_frame())
            return "" if correlation == 2 else "Metadata answered out of order"
        finally:
            conn.close()

    try:
        return await asyncio.wait_for(ask(), timeout)
    except TimeoutError:
        return f"no answer to ApiVersions and Metadata within {timeout:g} s"
    except (OSError, asyncio.IncompleteReadError) as exc:
        return f"health connection failed: {exc.__class__.__name__}: {exc}"


async def check(node: Node, timeout: float) -> Health:
    health = Health(node)
    if node.pid is not None:
        health.alive = is_our_node(node.pid, node.node_id)
        health.rss_mb = rss_mb(node.pid) if health.alive else None
        if not health.alive:
            health.answering = False
            health.problem = f"{node.name}: process {node.pid} is gone"
            return health
    problem = await answers(node, timeout)
    if problem:
        health.answering = False
        health.problem = f"{node.name}: {problem}"
    return health


@dataclass
class LogWatch:
    """The part of a node's log written since the last :meth:`new_problems`."""

    path: Path
    offset: int = 0
    seen: list[str] = field(default_factory=list)

    def skip_to_end(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def new_problems(self) -> list[str]:
        """Tracebacks (whole) and ERROR lines written since the last call."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        cut = data.rfind(b"\n") + 1  # only whole lines; the rest next time
        self.offset += cut
        text = data[:cut].decode(errors="replace")
        problems = _problems(text)
        self.seen.extend(problems)
        return problems


def _problems(text: str) -> list[str]:
    """Each ERROR/CRITICAL line or traceback, with the traceback's lines joined to it."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not PROBLEM.search(line):
            i += 1
            continue
        block = [line]
        i += 1
        # a traceback's lines follow its log line; they do not start with a timestamp
        while i < len(lines) and not re.match(r"\d{4}-\d\d-\d\d ", lines[i]):
            block.append(lines[i])
            i += 1
        out.append("\n".join(block))
    return out


__all__ = ["Health", "LogWatch", "answers", "check", "rss_mb"]
