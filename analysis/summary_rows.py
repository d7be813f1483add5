"""The summary of a history (per-second op timeline, restarts, the names the checkers key on),
built from the rows of its one pass — rows either engine computes: Spark's summary job
(summary.py) or the reference's plain-Python pass (reference/summary.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEC = 1_000_000_000


@dataclass
class Summary:
    timeline: list[dict[str, Any]]  #: per (second, type, outcome): ops, rows, latency
    starts: dict[str, list[int]]  #: process -> op ids of its ``start`` ops
    processes: list[str]  #: sorted; index = proc_rank
    topics: list[str]  #: sorted; index = topic_rank
    partitions: list[tuple[str, int]]  #: sorted (topic, partition) pairs in the history
    #: (topic, partition) -> producer id -> whether a send of it there was acknowledged (a send
    #: without a topic counts under (None, None))
    producers: dict[tuple[Any, Any], dict[int, bool]] = field(default_factory=dict)
    #: name -> its 64-bit hash (Spark's ``xxhash64``), for the processes and for the topics
    process_keys: dict[str, int] = field(default_factory=dict)
    topic_keys: dict[str, int] = field(default_factory=dict)
    #: ops per event type and history rows: derived from the timeline (not constructor
    #: arguments, so ``dataclasses.replace`` derives them again instead of adding to them)
    type_counts: dict[str, int] = field(init=False, default_factory=dict)
    events: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.type_counts, self.events = {}, 0
        for r in self.timeline:
            self.type_counts[r["type"]] = self.type_counts.get(r["type"], 0) + int(r["ops"])
            self.events += int(r["rows"])


@dataclass(frozen=True)
class Extents:
    """The least and greatest op id and offset of a history (0 when it has none)."""

    lo_op: int = 0
    hi_op: int = 0
    lo_off: int = 0
    hi_off: int = 0


def summary_of_rows(rows: list[Any]) -> tuple[Summary, Extents]:
    """The summary from the summary pass's rows: ``T`` rows (per second, type, outcome, and
    start op: ops, rows, latency sum/count/max) and ``C`` rows (per process, partition and
    producer id of a send: op ids, offsets, whether acknowledged, the names' hash keys)."""
    starts: dict[str, list[int]] = {}
    timeline: dict[tuple[Any, ...], dict[str, Any]] = {}
    processes: set[str] = set()
    process_keys: dict[str, int] = {}
    topic_keys: dict[str, int] = {}
    partitions: set[tuple[str, int]] = set()
    producers: dict[tuple[Any, Any], dict[int, bool]] = {}
    lo_op = lo_off = 0
    hi_op = hi_off = 0
    for r in rows:
        if r["tag"] == "C":
            processes.add(r["process"])
            if r["process_key"] is not None:  # the reference engine keys nothing by hash
                process_keys[r["process"]] = r["process_key"]
            if r["topic"] is not None and r["topic_key"] is not None:
                topic_keys[r["topic"]] = r["topic_key"]
            tp = (r["topic"], r["partition"])
            if tp[0] is not None and tp[1] is not None:
                partitions.add(tp)
            if r["pid"] is not None:
                known = producers.setdefault(tp, {})
                known[r["pid"]] = known.get(r["pid"], False) or bool(r["acked"])
            lo_op, hi_op = min(lo_op, r["ops"]), max(hi_op, r["op_id"])
            if r["min_off"] is not None:
                lo_off, hi_off = min(lo_off, r["min_off"]), max(hi_off, r["max_off"])
            continue
        d = {k: r[k] for k in ("sec", "type", "outcome", "ops", "rows", "lat_sum", "lat_n")}
        d["lat_max"] = r["lat_max"]
        if r["process"] is not None:
            starts.setdefault(r["process"], []).append(int(r["op_id"]))
        key = (d["sec"], d["type"], d["outcome"])
        cur = timeline.get(key)
        if cur is None:
            timeline[key] = d
        else:  # several start ops in one second
            for k in ("ops", "rows", "lat_sum", "lat_n"):
                if d[k] is not None:
                    cur[k] = (cur[k] or 0) + d[k]
            if d["lat_max"] is not None:
                cur["lat_max"] = max(cur["lat_max"] or d["lat_max"], d["lat_max"])
    topics = sorted({t for t, _ in partitions})
    summary = Summary(
        timeline=[timeline[k] for k in sorted(timeline, key=lambda k: _nulls_first(*k))],
        starts={p: sorted(ops) for p, ops in starts.items()},
        processes=sorted(processes),
        topics=topics,
        partitions=sorted(partitions),
        producers=producers,
        process_keys=process_keys,
        topic_keys={t: topic_keys[t] for t in topics if t in topic_keys},
    )
    return summary, Extents(lo_op, hi_op, lo_off, hi_off)


def _nulls_first(*xs: Any) -> tuple[tuple[int, Any], ...]:
    return tuple((0, 0) if x is None else (1, x) for x in xs)
