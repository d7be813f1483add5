"""Metrics: the cluster's own transaction metrics, as scraped from the nodes, against the ground
truth computed from the history and the final cluster state. Tolerances:
(a) PartitionsWithLateTransactionsCount — summed over nodes at the last scrape, it equals the
number of partitions holding an open transaction older than transaction.max.timeout.ms + 5 min
at that time (exact); and no sample is non-zero while the run is younger than that limit.
(b) LastStableOffsetLag — per partition, the latest sample (max over nodes at that time), if
taken no earlier than 2 s before the final state was captured, equals high watermark - LSO from
the final state (exact). (c) ProducerIdCount — summed over nodes at the last scrape, at least
the number of distinct producer ids with an acknowledged write and at most the sum over
partitions of (distinct producer ids that attempted writes there x replicas); the lower bound
only when every node's last scrape is no earlier than 2 s before the final state was captured
and the cluster's producer.id.expiration.ms is not shorter than the run (a partition forgets
an idle producer id), the upper bound only when every send was recorded with its producer id
(each unchecked bound says why in a note). (d) transaction
counters (TransactionsCommitted / TransactionsAborted, per node in memory, counted when the
coordinator writes CompleteCommit / CompleteAbort; only transactions that wrote something
count). Upper bound: every increase seen, summed over nodes (a drop read as a restart from
zero), is at most acknowledged + unknown-outcome commits — a restart cannot push it over, as a
transaction is counted once: the count follows the persisted CompleteCommit, and a restarted
coordinator resumes (and counts) only transactions it finds still in PrepareCommit. Lower
bounds: the counters summed over nodes at their last scrapes are at least the acknowledged
commits, and at least the acknowledged aborts of transactions that got a write acknowledged or
sent offsets (timeouts may add more; an abort whose records were all purged unsent never
reaches the coordinator, as librdkafka then sends no EndTxn). When a counting node restarted
(a kill or restart of it in the fault log, or a sample below the one before), what it counted
between its last scrape and the restart is lost with the process, so the lower bounds count
only commits invoked, and aborts of transactions begun, after the last such restart over every
counting node ended (the end of its fault; for a drop no such fault spans, the sample that
dropped), against the counters' values at the nodes' last scrapes: the nodes' last processes
count those in full; earlier ones are not checked (the notes say how many).
A pause keeps the process and its counters, so it leaves the bounds whole. If a node's last
process was never scraped, that counter's lower bound is not checked. A run cut short (run.json
not complete: no final phase, so the last scrapes may predate its last transactions) has the
lower bounds of (c) and (d) unchecked. A metric the nodes do not
expose (an Apache Kafka release has no transaction counters) makes the checker unknown, never
valid: the reason names it (with the launcher's word on why, run.json's
cluster.metrics_unavailable) and what was judged; a violated rule still makes it invalid.
Clusters that expose no metrics make the checker unknown.
Count: violated rule instances."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...rundir.schema import EventType, Outcome
from ...rundir.schema import MetricName as M
from ..model.facts import RunFacts
from ..model.history import Op
from ..model.indexes import Indexes
from ..model.judged import Judged
from .metric_counters import judge_counters
from .metric_samples import (
    COUNTERS,
    KINDS,
    LATE_BUFFER_MS,
    NAME,
    NODE_METRICS,
    cut_short,
    ids_may_expire,
    late_at_end,
    late_too_early,
    lso_lag,
    producer_id_count,
    unexposed,
)

Sample = dict[str, Any]  #: a row of metrics.parquet


def producers(ops: Sequence[Op]) -> dict[tuple[Any, Any], dict[int, bool]]:
    """Per (topic, partition) a send went to ((None, None) for a send without items): producer id
    -> whether a send of it there was acknowledged."""
    out: dict[tuple[Any, Any], dict[int, bool]] = {}
    for op in ops:
        if op.type != EventType.SEND or op.producer_id is None:
            continue
        for tp in [(it.topic, it.partition) for it in op.items] or [(None, None)]:
            known = out.setdefault(tp, {})
            known[op.producer_id] = known.get(op.producer_id, False) or op.outcome == Outcome.OK
    return out


def unnamed_sends(ops: Sequence[Op]) -> bool:
    """Whether some send was recorded without its producer id (librdkafka names it only in a
    statistics snapshot, so a send before the first one has none): rule (c)'s upper bound is
    then left unchecked."""
    return any(op.type == EventType.SEND and op.producer_id is None for op in ops)


def _latest(samples: list[Sample]) -> list[Sample]:
    """Per (node, name, topic, partition): its latest sample (``t``: its time)."""
    last: dict[tuple[Any, ...], Sample] = {}
    for m in samples:
        key = (m["node"], m["name"], m.get("topic"), m.get("partition"))
        cur = last.get(key)
        if cur is None or m["time_ns"] > cur["t"]:
            last[key] = {**m, "t": m["time_ns"]}
    return list(last.values())


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """(a) late transactions, (b) LSO lag, (c) producer ids, (d) transaction counters."""
    out = Judged(NAME, KINDS)
    if facts.metrics is None or not facts.info.get("metrics_supported", True):
        out.unknown = "the cluster exposes no metrics (skipped)"
        return out
    samples = [m for m in facts.metrics if m["name"] in NODE_METRICS]
    last = _latest(samples)
    names = {r["name"] for r in last}
    if not names:
        out.unknown = "no transaction metrics were scraped from the nodes (skipped)"
        return out
    missing = [n for n in NODE_METRICS if n not in names]
    fs = facts.final_state
    short = cut_short(facts.info)
    if short:
        out.notes.append(short)
    if M.PARTITIONS_WITH_LATE_TXNS.value in names:
        late = [r for r in last if r["name"] == M.PARTITIONS_WITH_LATE_TXNS.value]
        _late(facts, out, samples, late)
    if M.LAST_STABLE_OFFSET_LAG.value in names:
        if fs is None:
            out.notes.append("no final state: LastStableOffsetLag not checked")
        else:
            lso_lag(out, fs, [r for r in last if r["name"] == M.LAST_STABLE_OFFSET_LAG.value])
    if M.PRODUCER_ID_COUNT.value in names:
        expiring = ids_may_expire(facts.info)
        if expiring:
            out.notes.append(expiring)
        pids = [r for r in last if r["name"] == M.PRODUCER_ID_COUNT.value]
        producer_id_count(
            out,
            producers(ix.ops),
            fs,
            pids,
            lower_bound=not short and not expiring,
            unnamed_sends=unnamed_sends(ix.ops),
        )
    if any(c in names for c in COUNTERS):
        judge_counters(ix, facts, out, samples)
    if missing:  # never valid on what was not seen
        out.unknown = unexposed(missing, [n for n in NODE_METRICS if n in names], facts.info)
    return out


def _late(facts: RunFacts, out: Judged, samples: list[Sample], latest: list[Sample]) -> None:
    limit_ms = facts.transaction_max_timeout_ms + LATE_BUFFER_MS
    if facts.final_state is not None:
        late_at_end(out, facts.final_state, latest, limit_ms)
    started = facts.info.get("started_ns")
    if started is None:
        return
    early = [
        m
        for m in samples
        if m["name"] == M.PARTITIONS_WITH_LATE_TXNS.value
        and m["value"] > 0
        and m["time_ns"] - started <= limit_ms * 1_000_000
    ]
    late_too_early(out, min(early, key=lambda m: m["time_ns"], default=None), started)
