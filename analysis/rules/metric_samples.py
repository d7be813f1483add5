"""The metrics checker's rules (a)-(c) over metric samples, and the verdict of rule (d) over
the counters' totals (rules/metrics.py states them): shared by both engines — the plain rule
(rules/metrics.py) reads the samples from the run, the Spark implementation
(spark/checkers/metrics.py) collects them with Spark, and both judge them here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...rundir.cluster_identity import cluster_settings
from ...rundir.final_state import FinalState
from ...rundir.schema import MetricName as M
from ..model.judged import Findings, row

NAME = "metrics"
KINDS: tuple[str, ...] = (
    "late_transactions_count",
    "lso_lag",
    "producer_id_count",
    "transaction_counters",
)
LATE_BUFFER_MS = 5 * 60 * 1000
LAG_FRESHNESS_NS = 2_000_000_000

#: the transaction counters rule (d) judges
COUNTERS = (M.TXNS_COMMITTED.value, M.TXNS_ABORTED.value)
#: every node metric the checker reads
NODE_METRICS = (
    M.PARTITIONS_WITH_LATE_TXNS.value,
    M.LAST_STABLE_OFFSET_LAG.value,
    M.PRODUCER_ID_COUNT.value,
    *COUNTERS,
)
#: node faults that end the node's process, and with it its in-memory counters
RESET_FAULTS = ("kill", "restart")
#: the end of a reset fault that never ended: the node's last process is never observed
NEVER = 2**63 - 1
Sample = Any
"""A metric sample read by field name (a dict of metrics.parquet or a Spark Row), or the
latest one per node and series (with ``t``)."""


def unexposed(missing: list[str], judged: list[str], info: Mapping[str, Any]) -> str:
    """Why the checker cannot say ``valid``: the metrics it reads that the nodes do not expose
    (with the launcher's reason, ``run.json``'s ``cluster.metrics_unavailable``: an Apache
    Kafka release has no transaction counters), and what it judged without anomalies."""
    found = info.get("cluster")
    cluster: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    reasons = cluster.get("metrics_unavailable") or {}
    flavour = " ".join(str(x) for x in (cluster.get("flavour"), cluster.get("version")) if x)
    default = f"not exposed by the cluster ({flavour})" if flavour else "not exposed by the nodes"
    told = "; ".join(f"{m}: {reasons.get(m) or default}" for m in missing)
    rest = f"; judged without anomalies: {', '.join(judged)}" if judged else ""
    return f"not judged: {told}{rest}"


def producer_id_expiration_ms(info: Mapping[str, Any]) -> int | None:
    """The cluster's ``producer.id.expiration.ms`` as run.json's cluster settings name it, or
    None when the run does not set it."""
    for setting in cluster_settings(info):
        key, sep, value = setting.partition("=")
        if sep and key.strip() == "producer.id.expiration.ms":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def ids_may_expire(info: Mapping[str, Any]) -> str | None:
    """Why ProducerIdCount's lower bound is left unchecked on a run whose producer ids may
    have expired before the last scrape (``producer.id.expiration.ms`` set shorter than the
    run: a partition forgets an idle producer id, so the nodes count fewer ids than wrote),
    or None."""
    expiration = producer_id_expiration_ms(info)
    if expiration is None:
        return None
    started, ended = info.get("started_ns"), info.get("ended_ns")
    if isinstance(started, int) and isinstance(ended, int) and ended - started <= expiration * 1e6:
        return None
    return (
        f"ProducerIdCount's lower bound is not checked: producer.id.expiration.ms is "
        f"{expiration} ms, shorter than the run, so ids that stopped writing may have expired"
    )


def cut_short(info: Mapping[str, Any]) -> str | None:
    """Why the lower bounds of (c) and (d) are left unchecked on a run that did not complete
    (run.json ``complete`` false: interrupted, or its harness failed), or None.  Such a run has
    no final phase: its nodes' last scrapes may predate its last transactions and producer ids,
    and an under-count there is the scrape's lateness, not the nodes'."""
    if info.get("complete") is not False:
        return None
    return (
        "the run was cut short (run.json: not complete): the nodes' last scrapes may predate "
        "its last transactions, so the lower bounds of ProducerIdCount and the transaction "
        "counters are not checked"
    )


def late_at_end(out: Findings, fs: FinalState, latest: list[Sample], limit_ms: int) -> None:
    """(a) PartitionsWithLateTransactionsCount at the last scrape against the final state's
    open transactions older than ``limit_ms`` then."""
    t = max(r["t"] for r in latest)
    reported = sum(r["value"] for r in latest)
    late = {
        (o.get("topic"), o.get("partition"))
        for o in fs.get("open_transactions") or []
        if o.get("start_ns") is not None and t - o["start_ns"] > limit_ms * 1_000_000
    }
    out.checked["late_transactions_final"] = 1
    if reported != len(late):
        ev = {
            "metric": M.PARTITIONS_WITH_LATE_TXNS.value,
            "reported_sum_over_nodes": reported,
            "expected": len(late),
            "late_partitions": sorted(map(list, late)),
            "per_node": {r["node"]: r["value"] for r in latest},
            "tolerance": "exact",
        }
        out.rows.append(row(NAME, "late_transactions_count", t, ev, as_json=False))


def late_too_early(out: Findings, first_early: Sample | None, started: int) -> None:
    """(a) The first non-zero PartitionsWithLateTransactionsCount sample taken while the run
    was younger than the late limit, if any."""
    if first_early is None:
        return
    ev = {
        "metric": M.PARTITIONS_WITH_LATE_TXNS.value,
        "node": first_early["node"],
        "reported": first_early["value"],
        "run_age_ms": (first_early["time_ns"] - started) // 1_000_000,
        "why": "no transaction can be late this early in the run",
    }
    out.rows.append(row(NAME, "late_transactions_count", first_early["time_ns"], ev, as_json=False))


def lso_lag(out: Findings, fs: FinalState, latest: list[Sample]) -> None:
    """(b) LastStableOffsetLag per partition, its latest fresh sample against the final state."""
    captured = fs.get("captured_ns") or 0
    newest: dict[tuple[str, int], tuple[int, float, dict[str, float]]] = {}
    for r in latest:
        key = (r["topic"], r["partition"])
        cur = newest.get(key)
        if cur is None or r["t"] > cur[0]:
            newest[key] = (r["t"], r["value"], {r["node"]: r["value"]})
        elif r["t"] == cur[0]:
            newest[key] = (cur[0], max(cur[1], r["value"]), {**cur[2], r["node"]: r["value"]})
    stale = 0
    for p in fs["partitions"]:
        key = (p["topic"], p["partition"])
        if key not in newest:
            continue
        t, value, per_node = newest[key]
        if t < captured - LAG_FRESHNESS_NS:
            stale += 1
            continue
        expected = p["high_watermark"] - p["lso"]
        out.checked["lso_lag_partitions"] = out.checked.get("lso_lag_partitions", 0) + 1
        if value != expected:
            ev = {
                "metric": M.LAST_STABLE_OFFSET_LAG.value,
                "topic": p["topic"],
                "partition": p["partition"],
                "reported": value,
                "per_node": per_node,
                "expected": expected,
                "final_state": {"lso": p["lso"], "high_watermark": p["high_watermark"]},
                "tolerance": "exact",
            }
            out.rows.append(row(NAME, "lso_lag", t, ev, as_json=False))
    if stale:
        out.notes.append(f"{stale} partitions' LastStableOffsetLag samples predate the final state")


def producer_id_count(
    out: Findings,
    producers: Mapping[tuple[Any, Any], Mapping[int, bool]],
    fs: FinalState | None,
    latest: list[Sample],
    lower_bound: bool = True,
    unnamed_sends: bool = False,
) -> None:
    """(c) ProducerIdCount summed over nodes between the producer ids with an acknowledged
    write and, per partition, the ids that tried to write there times its replicas.
    ``producers``: per (topic, partition), producer id -> whether a write was acknowledged;
    ``lower_bound`` False: only the upper bound is checked (a run cut short). The lower bound
    counts the ids acknowledged over the whole run, so it is checked only when every node's
    last scrape is fresh (no earlier than ``LAG_FRESHNESS_NS`` before the final state was
    captured, as rule (b)): a scrape that timed out for the rest of the run on a loaded
    machine left a count taken before most producers wrote (Apache Kafka 4.4.0 at load 77:
    its nodes' exporters last answered 94-98 s before the final state).  ``unnamed_sends``:
    some send was recorded without its producer id, which leaves the upper bound unchecked."""
    lower = len({pid for pids in producers.values() for pid, acked in pids.items() if acked})
    captured = fs.get("captured_ns") if fs is not None else None
    oldest = min(r["t"] for r in latest)
    if lower_bound and captured and oldest < captured - LAG_FRESHNESS_NS:
        lower_bound = False
        out.notes.append(
            f"ProducerIdCount's lower bound not checked: a node's last scrape predates the final "
            f"state by {(captured - oldest) / 1e9:.0f} s (producer ids since are not in it)"
        )
    if not lower_bound:
        lower = 0
    n_by_tp = {tp: len(pids) for tp, pids in producers.items()}
    replicas = {
        (p["topic"], p["partition"]): len(p.get("replicas") or [])
        for p in (fs["partitions"] if fs is not None else [])
    }
    upper: int | None = None
    if unnamed_sends:  # a writer the history cannot name: the nodes may count it, nothing bounds it
        out.notes.append(
            "ProducerIdCount's upper bound is not checked: some sends were recorded without "
            "their producer id (librdkafka's statistics had not named it yet)"
        )
    elif fs is not None and all(replicas.get(tp) for tp in n_by_tp):
        upper = sum(n * replicas[tp] for tp, n in n_by_tp.items())
    t = max(r["t"] for r in latest)
    reported = sum(r["value"] for r in latest)
    out.checked["producer_id_count"] = 1
    if reported < lower or (upper is not None and reported > upper):
        ev = {
            "metric": M.PRODUCER_ID_COUNT.value,
            "reported_sum_over_nodes": reported,
            "per_node": {r["node"]: r["value"] for r in latest},
            "expected_at_least": lower,
            "expected_at_most": upper,
        }
        out.rows.append(row(NAME, "producer_id_count", t, ev, as_json=False))


def counter_violation(
    name: str, total: float, last: float | None, since: int | None, n: dict[str, int]
) -> dict[str, Any] | None:
    """Rule (d): the evidence of a violated counter rule, or None.  ``total``: every increase
    seen (for the upper bound); ``last``: the last processes' counts (for the lower bound;
    None when it is not checked); ``since``: the restart cut-off of the lower bound; ``n``:
    the history's counts (ok, info, ok_after, aborted, aborted_after)."""
    commits = name == M.TXNS_COMMITTED.value
    lower = n["ok_after"] if commits else n["aborted_after"]
    upper = n["ok"] + n["info"]
    if not (last is not None and last < lower) and not (commits and total > upper):
        return None
    ev: dict[str, Any] = {"metric": name, "reported_total": total}
    if commits and last is not None:
        ev["expected_range"] = [lower, upper]
    elif commits:
        ev["expected_at_most"] = upper
    else:
        ev["expected_at_least"] = lower
    if commits:
        ev["acknowledged_commits"] = n["ok"]
        ev["unknown_outcome_commits"] = n["info"]
    if since is not None:
        ev["counted_after_ns"] = since
        if last is not None:
            ev["reported_by_last_processes"] = last
    return ev


def _at(ns: int, started: int | None) -> str:
    if ns == NEVER:
        return "never (not back)"
    return f"+{(ns - started) / 1e9:.1f} s" if started is not None else f"{ns} ns"


def restart_note(
    restarted: dict[str, tuple[int, int]], since: int, started: int | None, n: dict[str, int]
) -> str:
    """What the lower bounds leave out because counting nodes restarted."""
    until = {node: _at(max(e, d), started) for node, (e, d) in restarted.items()}
    where = ", ".join(f"{node} until {at}" for node, at in sorted(until.items()))
    return (
        f"counting nodes restarted ({where}): what a counter gained between its node's last "
        "scrape and the restart is lost, so the lower bounds count only transactions whose "
        f"commit was invoked (aborts: that began) after {_at(since, started)}: "
        f"{n['ok_after']} of {n['ok']} acknowledged commits, {n['aborted_after']} of "
        f"{n['aborted']} acknowledged aborts"
    )
