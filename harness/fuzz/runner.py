"""Running fuzz cases in batches, with a health check after each batch.

Many connections work at once (``concurrency``), each on the next case id. A case the
node has not answered within ``patience`` is left to wait on its own (up to
``case_timeout``) while its worker goes on with a new connection, so long-polling
requests (a Fetch whose max wait was mutated upwards) do not slow the run.

After every batch each node is checked (:mod:`.health`). When one is not well the
batch's cases for that node are sent again one at a time, with a check after each, to
find the case that does it; that case (or, when none does alone, every suspect) is saved
as a finding. A crashed or hung node is restarted when the cluster is ours.
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import findings as findings_io
from .findings import Finding
from .health import Health, LogWatch, check
from .mutators import Case, make_case
from .seeds import Seed
from .target import (
    Connection,
    Node,
    Outcome,
    answer_of_single,
    answers_until_eof,
    send_alone,
    write_case,
)
from .typed import TypedContext, make_typed_case

Restart = Callable[[Node], Awaitable[Node]]
"""Restarts a node (kill it first if it runs) and returns it as it now runs."""

REPLAY_TIMEOUT_S = 2.0
MAX_SAVED_MISMATCHES = 20


@dataclass
class FuzzOptions:
    cases: int = 100_000
    seed: int = 1
    first_case: int = 0
    batch: int = 5_000
    concurrency: int = 64
    patience: float = 0.5
    case_timeout: float = 30.0
    health_timeout: float = 10.0
    rss_limit_mb: float = 512.0
    max_waiting: int = 256
    findings_dir: Path = Path("fuzz-findings")
    strategy: str = "bytes"  # "bytes" (mutators), "typed" (typed.py) or "mixed" (alternate)


@dataclass
class Summary:
    cases: int = 0
    seconds: float = 0.0
    seed: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    unanswered_by_api: collections.Counter[str] = field(default_factory=collections.Counter)
    crashes: int = 0
    hangs: int = 0
    tracebacks: int = 0
    rss_over: int = 0
    restart_lines: int = 0
    """Problems logged while a node restarted after a crash or hang (not counted as
    tracebacks: the restart causes them)."""
    mismatches: int = 0
    max_rss_mb: dict[str, float] = field(default_factory=dict)
    rss_limit_mb: float = 0.0
    findings: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "seconds": round(self.seconds, 1),
            "cases_per_s": round(self.cases / self.seconds) if self.seconds else 0,
            "seed": self.seed,
            "crashes": self.crashes,
            "hangs": self.hangs,
            "tracebacks": self.tracebacks,
            "mismatches": self.mismatches,
            "rss_over_limit": self.rss_over,
            "logged_during_restarts": self.restart_lines,
            "rss_limit_mb": self.rss_limit_mb,
            "max_rss_mb": {k: round(v, 1) for k, v in self.max_rss_mb.items()},
            "outcomes": dict(self.outcomes),
            "unanswered_by_api": dict(self.unanswered_by_api),
            "nodes": self.nodes,
            "findings": self.findings,
            "clean": self.clean,
        }


STRATEGIES = ("bytes", "typed", "mixed")


def case_for(
    corpora: Sequence[Sequence[Seed]], options: FuzzOptions, case_id: int, typed: TypedContext
) -> Case:
    """Case ``case_id`` of the run: a byte mutation, a typed one, or (mixed) odd case ids
    typed."""
    strategy = options.strategy
    if strategy == "typed" or (strategy == "mixed" and case_id % 2):
        return make_typed_case(corpora, typed, options.seed, case_id)
    return make_case(corpora, options.seed, case_id)


class Runner:
    def __init__(
        self,
        nodes: list[Node],
        corpora: Sequence[Sequence[Seed]],
        options: FuzzOptions,
        *,
        restart: Restart | None = None,
        progress: Callable[[str], None] | None = None,
        typed: TypedContext | None = None,
    ) -> None:
        self.nodes = list(nodes)
        self.corpora = corpora
        self.options = options
        self.typed = typed or TypedContext()
        self.restart = restart
        self.progress = progress
        self.summary = Summary(seed=options.seed, rss_limit_mb=options.rss_limit_mb)
        self.summary.nodes = [n.name for n in nodes]
        self._pools: list[list[Connection]] = [[] for _ in nodes]
        self._waiting: dict[asyncio.Task[None], Case] = {}
        self._watches = [LogWatch(n.log) if n.log is not None else None for n in nodes]
        self._stop = False
        self._known: set[str] = set()
        """Signatures of tracebacks already narrowed down (each is bisected once)."""

    # ---- the run ---------------------------------------------------------------------
    async def run(self) -> Summary:
        options = self.options
        for watch in self._watches:
            if watch is not None:
                watch.skip_to_end()
        started = time.monotonic()
        end = options.first_case + options.cases
        next_id = options.first_case
        while next_id < end and not self._stop:
            count = min(options.batch, end - next_id)
            batch = await self._run_batch(next_id, count)
            next_id += count
            self.summary.cases += count
            await self._after_batch(batch)
            self.summary.seconds = time.monotonic() - started
            self._report()
        await self._drain()
        await self._after_batch([])
        self.summary.seconds = time.monotonic() - started
        for pool in self._pools:
            for conn in pool:
                conn.close()
            pool.clear()
        return self.summary

    async def _run_batch(self, first: int, count: int) -> list[Case]:
        ids = iter(range(first, first + count))
        done: list[Case] = []
        workers = [
            asyncio.ensure_future(self._worker(ids, done))
            for _ in range(min(self.options.concurrency, count))
        ]
        await asyncio.gather(*workers)
        return done

    async def _worker(self, ids: Iterator[int], done: list[Case]) -> None:
        for case_id in ids:
            case = case_for(self.corpora, self.options, case_id, self.typed)
            done.append(case)
            while len(self._waiting) >= self.options.max_waiting:
                await asyncio.wait(list(self._waiting), return_when=asyncio.FIRST_COMPLETED)
            await self._send(case)

    async def _send(self, case: Case) -> None:
        node_index = case.node
        pool = self._pools[node_index]
        conn: Connection | None = pool.pop() if case.single and pool else None
        if conn is None:
            try:
                conn = await asyncio.wait_for(
                    Connection.open(self.nodes[node_index]), self.options.health_timeout
                )
            except (OSError, TimeoutError):
                self.summary.outcomes[Outcome.REFUSED.value] += 1
                return
        write_case(conn, case)
        reading = answer_of_single(conn, case) if case.single else answers_until_eof(conn)
        task = asyncio.ensure_future(reading)
        finished, _ = await asyncio.wait((task,), timeout=self.options.patience)
        if finished:
            self._record(case, task.result(), conn)
            return
        waiter = asyncio.ensure_future(self._wait_longer(case, conn, task))
        self._waiting[waiter] = case
        waiter.add_done_callback(self._waiting.pop)

    async def _wait_longer(
        self, case: Case, conn: Connection, task: asyncio.Future[Outcome]
    ) -> None:
        remaining = max(self.options.case_timeout - self.options.patience, 0.0)
        finished, _ = await asyncio.wait((task,), timeout=remaining)
        if finished:
            self._record(case, task.result(), conn)
            return
        task.cancel()
        self.summary.unanswered_by_api[sent_api(case)] += 1
        self._record(case, Outcome.UNANSWERED, conn)

    def _record(self, case: Case, outcome: Outcome, conn: Connection) -> None:
        self.summary.outcomes[outcome.value] += 1
        if outcome is Outcome.ANSWERED and case.single:
            self._pools[case.node].append(conn)
            return
        conn.close()
        if outcome is Outcome.MISMATCH:
            self.summary.mismatches += 1
            if self.summary.mismatches <= MAX_SAVED_MISMATCHES:
                node = self.nodes[case.node]
                self._save(
                    Finding(
                        "mismatch",
                        node.node_id,
                        node.role,
                        "a response with another correlation id than the request's",
                        [case],
                        reproduced=True,
                    )
                )

    async def _drain(self) -> None:
        if self._waiting:
            await asyncio.wait(list(self._waiting))

    # ---- after a batch -------------------------------------------------------------
    async def _after_batch(self, batch: list[Case]) -> None:
        healths = await asyncio.gather(*(check(n, self.options.health_timeout) for n in self.nodes))
        for index, health in enumerate(healths):
            suspects = [c for c in batch if c.node == index]
            suspects += [c for c in self._waiting.values() if c.node == index]
            await self._judge(index, health, suspects)

    async def _judge(self, index: int, health: Health, suspects: list[Case]) -> None:
        node = self.nodes[index]
        if health.rss_mb is not None:
            key = f"{node.node_id}"
            self.summary.max_rss_mb[key] = max(self.summary.max_rss_mb.get(key, 0.0), health.rss_mb)
            if health.rss_mb > self.options.rss_limit_mb:
                self.summary.rss_over += 1
                self._save(
                    Finding(
                        "rss",
                        node.node_id,
                        node.role,
                        f"RSS {health.rss_mb:.0f} MiB over the bound of "
                        f"{self.options.rss_limit_mb:.0f} MiB",
                    )
                )
        if not health.ok:
            kind = "crash" if not health.alive else "hang"
            if kind == "crash":
                self.summary.crashes += 1
            else:
                self.summary.hangs += 1
            self._emit(f"fuzz: {health.problem}")
            if self.restart is None:
                self._save(Finding(kind, node.node_id, node.role, health.problem, suspects))
                self._stop = True
                return
            await self._restart(index)
            culprit = await self._bisect(index, suspects, kind)
            self._save(
                Finding(
                    kind,
                    node.node_id,
                    node.role,
                    health.problem,
                    [culprit] if culprit else suspects,
                    reproduced=culprit is not None,
                )
            )
        watch = self._watches[index]
        problems = watch.new_problems() if watch is not None else []
        new = [p for p in problems if signature(p) not in self._known]
        self.summary.tracebacks += len(problems)
        if new:
            self._known.update(signature(p) for p in new)
            detail = "\n\n".join(new[:3])
            self._emit(f"fuzz: {node.name} logged: {new[0].splitlines()[0]}")
            culprit = await self._bisect(index, suspects, "traceback")
            self._save(
                Finding(
                    "traceback",
                    node.node_id,
                    node.role,
                    detail,
                    [culprit] if culprit else suspects,
                    reproduced=culprit is not None,
                )
            )

    async def _restart(self, index: int) -> None:
        assert self.restart is not None
        for conn in self._pools[index]:
            conn.close()
        self._pools[index].clear()
        self.nodes[index] = await self.restart(self.nodes[index])
        # What the nodes log while one restarts (the others lose their connections to
        # it) is the restart's doing, not a case's: skip it once all answer again.
        await asyncio.gather(*(check(n, self.options.health_timeout) for n in self.nodes))
        for watch in self._watches:
            if watch is not None:
                self.summary.restart_lines += len(watch.new_problems())

    async def _bisect(self, index: int, suspects: list[Case], kind: str) -> Case | None:
        """Send the suspects again one at a time; the first after which the node shows
        ``kind`` again."""
        watch = self._watches[index]
        for case in suspects:
            node = self.nodes[index]
            await send_alone(node, case, REPLAY_TIMEOUT_S)
            if kind == "traceback":
                if watch is not None and watch.new_problems():
                    return case
                continue
            health = await check(node, self.options.health_timeout)
            if (kind == "crash" and not health.alive) or (kind == "hang" and not health.ok):
                await self._restart(index)
                return case
            if not health.ok:
                await self._restart(index)
        return None

    # ---- output --------------------------------------------------------------------
    def _save(self, finding: Finding) -> None:
        number = len(self.summary.findings) + 1
        path = findings_io.save(finding, self.options.findings_dir, number)
        self.summary.findings.append(str(path))
        self._emit(f"fuzz: finding {path}")

    def _emit(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _report(self) -> None:
        s = self.summary
        rate = s.cases / s.seconds if s.seconds else 0.0
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(s.outcomes.items()))
        rss = max(s.max_rss_mb.values(), default=0.0)
        self._emit(
            f"fuzz: {s.cases:,}/{self.options.cases:,} cases, {rate:,.0f}/s; {outcomes}; "
            f"waiting {len(self._waiting)}; crashes {s.crashes}, hangs {s.hangs}, "
            f"tracebacks {s.tracebacks}; max RSS {rss:.0f} MiB"
        )


def sent_api(case: Case) -> str:
    """``KEY vVERSION`` of the (first) frame as sent, mutations included."""
    if len(case.data) < 8:
        return "none"
    key, version = struct.unpack_from(">hh", case.data, 4)
    return f"{key} v{version}"


def signature(problem: str) -> str:
    """What makes two logged problems the same: the logger and its message's first words
    and the exception's last line (without the values in it)."""
    lines = problem.splitlines()
    head = " ".join(lines[0].split()[3:9]) if lines else ""
    last = lines[-1].split(":")[0] if len(lines) > 1 else ""
    return f"{head} | {last}"


async def replay(
    finding: Finding, node: Node, timeout: float, watch: LogWatch | None
) -> tuple[list[Outcome], Health, list[str]]:
    """Send a finding's cases to ``node`` one at a time; the outcomes, the node's health
    afterwards and what its log shows since."""
    if watch is not None:
        watch.skip_to_end()
    outcomes = [await send_alone(node, case, timeout) for case in finding.cases]
    health = await check(node, timeout)
    problems = watch.new_problems() if watch is not None else []
    return outcomes, health, problems


__all__ = ["FuzzOptions", "Restart", "Runner", "Summary", "replay", "signature"]
