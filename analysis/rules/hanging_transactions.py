"""Hanging transactions. (a) end_lso_lag: after healing and quiescence, a partition's last stable
offset is below its high watermark. (b) stale_open_transaction: an open transaction (on a
partition, or Ongoing/Prepare* at its coordinator) older than transaction.max.timeout.ms when
the final state was captured. (c) coordinator_mismatch: a partition holds an open transaction
of a producer id the coordinator does not list as Ongoing or Prepare* (for that partition, when
the coordinator lists partitions). (d) lso_stall: over the run (harness LSO/high-watermark
samples), a partition's LSO stood still while its high watermark moved, and stayed below the
high watermark for longer than the producers' transaction.timeout.ms plus the abort-cleanup
interval (10 s) plus 5 s of sampling slack (the stall is timed from the first sample where the
high watermark is above the LSO: an idle partition is not stalled), not counting the time a
node was killed, paused or restarting (a transaction whose coordinator or partition leader is
down cannot end); when a node-to-node request
or response was lost on a live connection (a drop or blackhole on an nA->nB link) from that
allowance before the stall to its end, plus the time the cluster's nodes take to notice and
retry it (run.json's cluster.lost_request_recovery_ms: Apache Kafka's request.timeout.ms,
30 s by default; none for the project's nodes, which probe a silent request within seconds).
Counts: (a) partitions, (b) producer ids, (c) open partition transactions, (d) stall episodes.
(a)-(c) need final_state.json; (d) needs harness samples."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...rundir.final_state import CoordinatorTransaction, FinalState, OpenTransaction
from ...rundir.schema import MetricName
from ..model.facts import RunFacts
from ..model.indexes import Indexes
from ..model.judged import Findings, Judged, row

NAME = "hanging_transactions"
KINDS: tuple[str, ...] = (
    "end_lso_lag",
    "stale_open_transaction",
    "coordinator_mismatch",
    "lso_stall",
)
ABORT_CLEANUP_INTERVAL_MS = 10_000
SAMPLING_SLACK_MS = 5_000
ACTIVE_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence", "Prepared"}
#: proxy faults that lose a request or response on a live connection (no reset tells the
#: sender): a node notices such a loss only when its request times out
LOST_REQUEST_FAULTS = frozenset({"drop_request", "drop_response", "blackhole"})


def lost_request_recovery_ms(info: dict[str, Any]) -> int:
    """How long the cluster's nodes take to notice a request to another node lost on a live
    connection and retry it (run.json's ``cluster.lost_request_recovery_ms``; Apache Kafka:
    its request.timeout.ms / replica.lag.time.max.ms, 30 s by default; the project's nodes
    probe a silent request within seconds and state nothing: 0)."""
    cluster = info.get("cluster")
    value = cluster.get("lost_request_recovery_ms") if isinstance(cluster, dict) else None
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def stall_allowance_ms(
    base_ms: int, faults: Sequence[dict[str, Any]], start_ns: int, end_ns: int, recovery_ms: int
) -> int:
    """(d)'s allowance for one stall: ``base_ms``, plus ``recovery_ms`` when a node-to-node
    request or response was lost (a drop or blackhole on an ``nA->nB`` link) from
    ``base_ms`` before the stall began to its end: markers or a replica fetch that a node
    retries only once its request timed out."""
    if not recovery_ms:
        return base_ms
    since = start_ns - base_ms * 1_000_000
    for f in faults:
        link = f.get("target") or ""
        if (
            f["kind"] in LOST_REQUEST_FAULTS
            and "->" in link
            and not link.startswith("client->")
            and f["start_ns"] <= end_ns
            and (f["end_ns"] or end_ns) >= since
        ):
            return base_ms + recovery_ms
    return base_ms


def _end_lso_lag(fs: FinalState, opens: list[OpenTransaction]) -> list[dict[str, Any]]:
    """(a) A partition whose LSO is below its high watermark when the final state was taken."""
    by_tp: dict[tuple[Any, Any], list[OpenTransaction]] = defaultdict(list)
    for o in opens:
        by_tp[(o.get("topic"), o.get("partition"))].append(o)
    return [
        row(
            NAME,
            "end_lso_lag",
            fs.get("captured_ns"),
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "lso": p["lso"],
                "high_watermark": p["high_watermark"],
                "lag": p["high_watermark"] - p["lso"],
                "open_transactions": by_tp.get((p["topic"], p["partition"]), []),
            },
            as_json=False,
        )
        for p in fs["partitions"]
        if p["lso"] < p["high_watermark"]
    ]


def _stale(fs: FinalState, opens: list[OpenTransaction], max_ms: int) -> list[dict[str, Any]]:
    """(b) Per producer id: an open transaction (on a partition, or active at its coordinator)
    older than transaction.max.timeout.ms at capture."""
    captured = fs.get("captured_ns")
    if captured is None:
        return []
    max_ns = max_ms * 1_000_000

    def old(x: OpenTransaction | CoordinatorTransaction) -> bool:
        start = x.get("start_ns")
        return start is not None and captured - start > max_ns

    stale: dict[Any, dict[str, Any]] = {}
    for o in opens:
        if old(o):
            stale.setdefault(o.get("producer_id"), {"partition_state": [], "coordinator": None})[
                "partition_state"
            ].append(o)
    for c in fs.get("coordinator_transactions") or []:
        if c.get("state") in ACTIVE_STATES and old(c):
            stale.setdefault(c.get("producer_id"), {"partition_state": [], "coordinator": None})[
                "coordinator"
            ] = c
    rows = []
    for pid, ev in sorted(stale.items(), key=lambda kv: str(kv[0])):
        starts = [o.get("start_ns") for o in ev["partition_state"]]
        if ev["coordinator"]:
            starts.append(ev["coordinator"].get("start_ns"))
        start = min(s for s in starts if s is not None)
        evidence = {
            "producer_id": pid,
            "age_ms": (captured - start) // 1_000_000,
            "transaction_max_timeout_ms": max_ms,
            **ev,
        }
        rows.append(row(NAME, "stale_open_transaction", start, evidence, as_json=False))
    return rows


def _mismatch(fs: FinalState, opens: list[OpenTransaction]) -> list[dict[str, Any]]:
    """(c) A partition's open transaction whose producer id the coordinator does not list as
    active (for that partition, when it lists partitions)."""
    coord = fs.get("coordinator_transactions")
    if coord is None:
        return []
    active: dict[Any, list[CoordinatorTransaction]] = defaultdict(list)
    for c in coord:
        if c.get("state") in ACTIVE_STATES:
            active[c.get("producer_id")].append(c)

    def known(o: OpenTransaction, c: CoordinatorTransaction) -> bool:
        here = (o.get("topic"), o.get("partition"))
        return not c.get("partitions") or any(
            (q.get("topic"), q.get("partition")) == here for q in c["partitions"]
        )

    return [
        row(
            NAME,
            "coordinator_mismatch",
            o.get("start_ns") or fs.get("captured_ns"),
            {
                "partition_open_transaction": o,
                "coordinator_view": [
                    c for c in coord if c.get("producer_id") == o.get("producer_id")
                ],
            },
            as_json=False,
        )
        for o in opens
        if not any(known(o, c) for c in active.get(o.get("producer_id"), []))
    ]


#: node faults during which a node serves nothing (its transactions cannot complete)
NODE_DOWN_KINDS = frozenset({"kill", "pause", "restart"})


def node_down_ns(faults: Sequence[dict[str, Any]], start: int, end: int) -> int:
    """How long within [start, end] some node was down (killed, paused or restarting: the
    union of those fault windows). A transaction whose coordinator or partition leader is
    down cannot be completed or aborted, so that time does not count towards a stall."""
    spans = sorted(
        (max(f["start_ns"], start), min(f["end_ns"] or end, end))
        for f in faults
        if f.get("kind") in NODE_DOWN_KINDS and str(f.get("target") or "").startswith("node")
    )
    total, reach = 0, start
    for lo, hi in spans:
        lo = max(lo, reach)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


def _lso_stalls(facts: RunFacts, metrics: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """(d) In the harness samples (max over nodes per time), a partition's LSO stood still over a
    run of samples while its high watermark rose, and stayed below the high watermark for longer
    than transaction.timeout.ms + the abort-cleanup interval + sampling slack (+ the cluster's
    lost-request recovery when a node-to-node request was lost: :func:`stall_allowance_ms`),
    timed from the run's first sample with the high watermark above the LSO (an idle partition
    is not stalled), not counting the time some node was down (:func:`node_down_ns`)."""
    lso_n, hw_n = MetricName.HARNESS_LSO.value, MetricName.HARNESS_HIGH_WATERMARK.value
    at: dict[tuple[Any, Any], dict[int, dict[str, float]]] = defaultdict(dict)
    for m in metrics:
        if m["name"] in (lso_n, hw_n) and m.get("topic") is not None:
            s = at[(m["topic"], m.get("partition"))].setdefault(m["time_ns"], {})
            s[m["name"]] = max(s.get(m["name"], m["value"]), m["value"])
    base_ms = facts.transaction_timeout_ms + ABORT_CLEANUP_INTERVAL_MS + SAMPLING_SLACK_MS
    recovery_ms = lost_request_recovery_ms(facts.info)
    rows = []
    for (topic, part), by_time in at.items():
        samples = [(t, s[lso_n], s[hw_n]) for t, s in sorted(by_time.items()) if len(s) == 2]
        runs: list[list[tuple[int, float, float]]] = []
        for smp in samples:
            if runs and runs[-1][-1][1] == smp[1]:
                runs[-1].append(smp)
            else:
                runs.append([smp])
        for run in runs:
            (_, lso, hw_start), (end, _, hw_end) = run[0], run[-1]
            start = next((t for t, lo, hw in run if hw > lo), None)
            if start is None or not (hw_end > hw_start and hw_end > lso):
                continue
            allowed_ms = stall_allowance_ms(base_ms, facts.faults, start, end, recovery_ms)
            down = node_down_ns(facts.faults, start, end)
            if end - start - down <= allowed_ms * 1_000_000:
                continue
            faults = [
                f for f in facts.faults if f["start_ns"] <= end and (f["end_ns"] or end) >= start
            ]
            ev = {
                "topic": topic,
                "partition": part,
                "lso": lso,
                "high_watermark": [hw_start, hw_end],
                "stalled_ms": (end - start) // 1_000_000,
                "allowed_ms": allowed_ms,
                "nodes_down_ms": down // 1_000_000,
                "from_ns": start,
                "to_ns": end,
                "overlapping_faults": faults,
            }
            rows.append(row(NAME, "lso_stall", start, ev, as_json=False))
    return rows


def final_state_rules(out: Findings, fs: FinalState, max_timeout_ms: int) -> None:
    """Rules (a)-(c), over the final state (small: both engines judge it with this)."""
    opens = fs.get("open_transactions") or []
    out.rows += _end_lso_lag(fs, opens)
    out.checked["partitions"] = len(fs["partitions"])
    out.rows += _stale(fs, opens, max_timeout_ms)
    out.rows += _mismatch(fs, opens)
    if fs.get("coordinator_transactions") is None:
        out.notes.append(
            "the cluster exposes no coordinator state: coordinator_mismatch not checked"
        )


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """(a)-(c) from the final state, (d) from the harness samples; unknown without either.
    Rows: (a) per partition, at the capture; (b) per producer id, at its oldest open
    transaction's start; (c) per open partition transaction, at its start; (d) per stall."""
    out = Judged(NAME, KINDS)
    fs = facts.final_state
    if fs is not None:
        final_state_rules(out, fs, facts.transaction_max_timeout_ms)
    else:
        out.notes.append("no final_state.json: end-of-run rules not checked")
    if facts.metrics is not None:
        out.rows += _lso_stalls(facts, facts.metrics)
    else:
        out.notes.append("no harness LSO/high-watermark samples: lso_stall not checked")
    if fs is None and facts.metrics is None:
        out.unknown = "neither final_state.json nor LSO samples in the run directory"
    return out
