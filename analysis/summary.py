"""The first, cheap pass over a history (one Spark job, two scans): the per-second op timeline,
the processes' restarts, and the dictionaries the checkers' numeric keys are built from.

The checkers aggregate on numbers wherever they can: Spark can only run a hash aggregation when
every aggregation buffer is fixed-width, so a ``max(struct(process, ...))`` or ``min(string)``
costs a sort of all the rows.  Processes and topics are therefore replaced by their rank in
sorted order (``proc_rank``; ``tp_key = topic_rank << 16 | partition``): ranks order exactly
like the names, so "the greatest (process, op_id)" or "the least (topic, partition, offset)"
become the greatest or least of one packed 64-bit number (``rank << OP_BITS | op_id``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..harness.history.run_dir import RunDirError
from ..harness.history.schema import EventType
from .engine.packed_keys import OP_BITS, PARTITION_BITS, PROC_BITS, TOPIC_BITS, name_key

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


def summarize(h: DataFrame) -> Summary:
    """Run the summary job over history ``h``.  Raises RunDirError for a history the packed
    keys cannot hold (negative or >= 2**40 op ids and offsets; 2**22 processes; 2**7 topics;
    partitions >= 2**16)."""
    first = F.col("item").isNull() | (F.col("item") == 0)
    lat = F.when(first, F.col("complete_ns") - F.col("invoke_ns"))
    is_start = F.col("type") == F.lit(EventType.START.value)
    timeline = h.groupBy(
        F.floor(F.col("invoke_ns") / SEC).alias("sec"),
        "type",
        "outcome",
        # start ops are few: each one stays its own group, so it comes back by name
        F.when(is_start, F.col("process")).alias("process"),
        F.when(is_start, F.col("op_id")).alias("op_id"),
    ).agg(
        F.sum(first.cast("long")).alias("ops"),
        F.count(F.lit(1)).alias("rows"),
        F.sum(lat).alias("lat_sum"),
        F.count(lat).alias("lat_n"),
        F.max(lat).alias("lat_max"),
    )
    # processes x partitions x producer ids: a few hundred groups, from one scan
    send = (F.col("type") == F.lit(EventType.SEND.value)) & F.col("producer_id").isNotNull()
    combos = h.groupBy(
        "process",
        "topic",
        "partition",
        F.when(send, F.col("producer_id")).alias("pid"),
    ).agg(
        F.min("op_id").alias("min_op"),
        F.max("op_id").alias("max_op"),
        F.min("offset").alias("min_off"),
        F.max("offset").alias("max_off"),
        F.max(send & (F.col("outcome") == "ok")).alias("acked"),
    )
    n = F.lit(None).cast("long")
    s = F.lit(None).cast("string")
    rows = (
        timeline.select(
            F.lit("T").alias("tag"),
            "sec",
            "type",
            "outcome",
            "process",
            "op_id",
            "ops",
            "rows",
            "lat_sum",
            "lat_n",
            "lat_max",
            F.lit(None).cast("string").alias("topic"),
            F.lit(None).cast("int").alias("partition"),
            n.alias("pid"),
            n.alias("min_off"),
            n.alias("max_off"),
            F.lit(None).cast("boolean").alias("acked"),
            n.alias("process_key"),
            n.alias("topic_key"),
        )
        .unionByName(
            combos.select(
                F.lit("C").alias("tag"),
                n.alias("sec"),
                s.alias("type"),
                s.alias("outcome"),
                "process",
                F.col("max_op").alias("op_id"),
                F.col("min_op").alias("ops"),
                n.alias("rows"),
                n.alias("lat_sum"),
                n.alias("lat_n"),
                n.alias("lat_max"),
                "topic",
                "partition",
                "pid",
                "min_off",
                "max_off",
                "acked",
                name_key(F.col("process")).alias("process_key"),
                name_key(F.col("topic")).alias("topic_key"),
            )
        )
        .collect()
    )
    return _build(rows)


def _build(rows: list[Any]) -> Summary:
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
            process_keys[r["process"]] = r["process_key"]
            if r["topic"] is not None:
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
    _limit(lo_op >= 0 and lo_off >= 0, f"negative op_id or offset ({lo_op}, {lo_off})")
    _limit(hi_op < 1 << OP_BITS, f"op_id {hi_op} >= 2**{OP_BITS}")
    _limit(hi_off < 1 << OP_BITS, f"offset {hi_off} >= 2**{OP_BITS}")
    _limit(len(processes) < 1 << PROC_BITS, f"{len(processes)} processes")
    _limit(len(topics) < 1 << TOPIC_BITS, f"{len(topics)} topics (limit {1 << TOPIC_BITS})")
    _limit(
        all(0 <= p < 1 << PARTITION_BITS for _, p in partitions),
        f"a partition number outside [0, 2**{PARTITION_BITS})",
    )
    return Summary(
        timeline=list(timeline.values()),
        starts={p: sorted(ops) for p, ops in starts.items()},
        processes=sorted(processes),
        topics=topics,
        partitions=sorted(partitions),
        producers=producers,
        process_keys=process_keys,
        topic_keys={t: topic_keys[t] for t in topics},
    )


def _limit(ok: bool, what: str) -> None:
    if not ok:
        raise RunDirError(f"the history is outside what the analysis can hold: {what}")
