"""Rule (d) of the metrics checker (its docstring states it): TransactionsCommitted and
TransactionsAborted against the history, with what a counting node's restart makes unknowable
(the increments between its last scrape and the restart, lost with the process) left out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ....rundir.schema import MetricName as M
from ...rules.metric_samples import (
    COUNTERS,
    NEVER,
    RESET_FAULTS,
    counter_violation,
    cut_short,
    restart_note,
)
from .base import CheckOutput, row
from .context import CheckContext

NAME = "metrics"


@dataclass(frozen=True)
class Series:
    """One node's samples of one counter."""

    node: str
    name: str
    total: float  #: its increases summed, a drop read as a restart (from zero)
    last_ns: int
    last_value: float
    #: (time of the sample before, time) of each sample below the one before: restarts seen
    drops: tuple[tuple[int, int], ...]


def series(m: DataFrame) -> list[Series]:
    c = m.filter(F.col("name").isin(*COUNTERS) & F.col("topic").isNull())
    prev = F.lag("value").over(Window.partitionBy("node", "name").orderBy("time_ns"))
    prev_ns = F.lag("time_ns").over(Window.partitionBy("node", "name").orderBy("time_ns"))
    c = c.withColumn("prev", prev).withColumn("prev_ns", prev_ns)
    drop = F.col("value") < F.col("prev")
    inc = F.when(F.col("prev").isNull() | drop, F.col("value")).otherwise(
        F.col("value") - F.col("prev")
    )
    rows = (
        c.groupBy("node", "name")
        .agg(
            F.sum(inc).alias("total"),
            F.max("time_ns").alias("last_ns"),
            F.max_by("value", "time_ns").alias("last_value"),
            F.collect_list(F.when(drop, F.array("prev_ns", "time_ns"))).alias("drops"),
        )
        .collect()
    )
    out = [
        Series(
            r["node"],
            r["name"],
            r["total"],
            r["last_ns"],
            r["last_value"],
            tuple(sorted((a, b) for a, b in r["drops"])),
        )
        for r in rows
    ]
    return sorted(out, key=lambda s: (s.node, s.name))


def _node_id(text: str | None) -> int | None:
    found = re.search(r"(\d+)$", (text or "").strip())
    return int(found.group(1)) if found else None


def restarts(faults: list[dict[str, Any]], ss: list[Series]) -> dict[str, tuple[int, int]]:
    """Per counting node that restarted: (the end of its last kill/restart in the fault log,
    NEVER if one did not end, else 0; the last of its counter drops that no such fault
    explains, else 0).  A reset fault whose node cannot be told hits every counting node."""
    nodes = sorted({s.node for s in ss})
    spans: dict[str, list[tuple[int, int]]] = {n: [] for n in nodes}
    for f in faults:
        if f["kind"] not in RESET_FAULTS:
            continue
        target = _node_id(f.get("target"))
        end = NEVER if f.get("end_ns") is None else int(f["end_ns"])
        for n in nodes:
            if target is None or _node_id(n) in (target, None):
                spans[n].append((int(f["start_ns"]), end))
    out: dict[str, tuple[int, int]] = {}
    for n in nodes:
        fault_end = max((end for _, end in spans[n]), default=0)
        drops = [
            t
            for s in ss
            if s.node == n
            for before, t in s.drops
            if not any(start < t and end > before for start, end in spans[n])
        ]
        if spans[n] or drops:
            out[n] = (fault_end, max(drops, default=0))
    return out


def check_counters(ctx: CheckContext, out: CheckOutput, m: DataFrame) -> None:
    ss = series(m)
    if not ss:
        return
    info = ctx.data.run.info
    restarted = restarts(ctx.data.faults, ss)
    # samples after ``since`` come from each node's last process; nothing it counts is lost
    since = max((max(e, d) for e, d in restarted.values()), default=None)
    n = _expected(ctx, since)
    if since is not None:
        out.notes.append(restart_note(restarted, since, info.get("started_ns"), n))
    for name in COUNTERS:
        mine = [s for s in ss if s.name == name]
        if not mine:
            continue
        unseen = [s.node for s in mine if not _last_process_seen(s, restarted)]
        short = cut_short(info) is not None
        last = None if unseen or short else sum(s.last_value for s in mine)
        commits = name == M.TXNS_COMMITTED.value
        if unseen and not short:  # a run cut short: the checker's notes say why
            out.notes.append(
                f"{name}: lower bound not checked: {', '.join(unseen)} not scraped after its "
                "last restart"
            )
        elif last is not None:
            out.checked["committed_counter_lower" if commits else "aborted_counter"] = 1
        if commits:
            out.checked["committed_counter"] = 1
        ev = counter_violation(name, sum(s.total for s in mine), last, since, n)
        if ev is not None:
            out.rows.append(row(NAME, "transaction_counters", info.get("ended_ns"), ev))


def _last_process_seen(s: Series, restarted: dict[str, tuple[int, int]]) -> bool:
    """Whether ``s``'s last sample surely comes from its node's last process."""
    fault_end, drop = restarted.get(s.node, (0, 0))
    return s.last_ns > fault_end and s.last_ns >= drop


def _expected(ctx: CheckContext, since: int | None) -> dict[str, int]:
    """Acknowledged commits (``ok``), unknown-outcome commits (``info``) and acknowledged aborts
    the coordinator hears of (``aborted``) of transactions that wrote something; ``*_after``:
    those invoked (aborts: begun) after ``since``."""
    wrote = ctx.proj.txns.filter((F.col("n_sends") > 0) | F.col("has_offsets"))
    after_commit = F.lit(True) if since is None else F.col("commit_invoke_ns") > F.lit(since)
    after_begin = F.lit(True) if since is None else F.col("begin_ns") > F.lit(since)
    heard_abort = (
        F.col("abort_ok") & ~F.col("commit_ok") & ((F.col("n_acked") > 0) | F.col("has_offsets"))
    )
    agg = wrote.agg(
        F.sum(F.col("commit_ok").cast("int")).alias("ok"),
        F.sum((~F.col("commit_ok") & F.col("commit_info")).cast("int")).alias("info"),
        F.sum(heard_abort.cast("int")).alias("aborted"),
        F.sum((F.col("commit_ok") & after_commit).cast("int")).alias("ok_after"),
        F.sum((heard_abort & after_begin).cast("int")).alias("aborted_after"),
    ).collect()[0]
    return {k: int(agg[k] or 0) for k in ("ok", "info", "aborted", "ok_after", "aborted_after")}
