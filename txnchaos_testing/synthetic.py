"""Synthetic histories: a small Kafka-transactions simulator that writes a run directory in the
shared history schema, plus anomaly injection. Used by the tests and the analysis benchmarks.

The simulator runs transactions one at a time (so the LSO equals the log end between them):
transactional writers send to random partitions and commit or abort (markers take an offset),
an idempotent writer sends plain records, read_committed consumers poll their assigned
partitions up to the LSO, a consume-transform-produce copier copies the input topic to an
output topic with send_offsets_to_transaction, and a final reader reads every partition.
It also emits metric samples, a fault log and the final cluster state.

Each ``inject_*`` method plants exactly one anomaly of a kind (touching only what that anomaly
needs) and returns a short description; the tests assert the matching checker counts it.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txnchaos.analysis.fault_actions import SCHEDULE_JSON
from txnchaos.rundir.compact import flatten_ops, sort_history, write_history_parquet
from txnchaos.rundir.final_state import parse_final_state, write_final_state
from txnchaos.rundir.outcome_log import NEMESIS_LOG
from txnchaos.rundir.run_dir import (
    FAULTS_JSONL,
    FINAL_STATE_JSON,
    METRICS_PARQUET,
    write_json,
    write_run_info,
)
from txnchaos.rundir.schema import (
    METRIC_ARROW_SCHEMA,
    OP_ARROW_SCHEMA,
    EventType,
    MetricName,
    encode_value,
)

SEC = 1_000_000_000
MS = 1_000_000


@dataclass
class SynthConfig:
    seed: int = 0
    writers: int = 3
    txns_per_writer: int = 20
    max_records_per_txn: int = 4
    topic: str = "t"
    partitions: int = 3
    abort_rate: float = 0.2
    consumers: int = 2
    poll_max: int = 5
    idempotent_sends: int = 10
    copiers: bool = True
    out_topic: str = "t-out"
    final_read: bool = True
    metrics: bool = True
    nodes: int = 3
    start_ns: int = 1_700_000_000 * SEC
    step_ns: int = 20 * MS
    transaction_timeout_ms: int = 60_000
    transaction_max_timeout_ms: int = 900_000


@dataclass
class Entry:
    offset: int
    value: str | None  # None for a control marker
    writer: str | None
    txn: int | None
    status: str  # pending | committed | aborted | marker


class Synth:
    """Builds a clean history; ``inject_*`` then plant anomalies; ``write`` saves the run dir."""

    def __init__(self, config: SynthConfig | None = None) -> None:
        self.cfg = config or SynthConfig()
        self.rng = random.Random(self.cfg.seed)
        self.t = self.cfg.start_ns
        self.ops: list[dict[str, Any]] = []
        self.op_ids: dict[str, int] = defaultdict(int)
        self.logs: dict[tuple[str, int], list[Entry]] = defaultdict(list)
        self.end_events: list[tuple[int, str, int, int, int]] = []  # t, topic, part, lso, hw
        self.txns: dict[tuple[str, int], dict[str, Any]] = {}
        self.positions: dict[str, dict[tuple[str, int], int]] = {}
        self.final_state: dict[str, Any] = {}
        self.metric_rows: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []
        self.schedule: list[dict[str, Any]] = []
        self.nemesis_log: list[dict[str, Any]] = []
        self.extra_metrics: list[dict[str, Any]] = []
        self.first_pending: dict[tuple[str, int], int] = {}
        #: (group, topic, partition) -> the offset its last committed transaction sent
        self.group_offsets: dict[tuple[str, str, int], int] = {}
        self._built = False

    # -- primitives -----------------------------------------------------------------------

    def tick(self, n: float = 1.0) -> int:
        self.t += int(self.cfg.step_ns * n * (0.5 + self.rng.random()))
        return self.t

    def op(
        self,
        process: str,
        type: EventType | str,
        outcome: str = "ok",
        items: list[dict[str, Any]] | None = None,
        *,
        latency: float = 0.5,
        **fields: Any,
    ) -> dict[str, Any]:
        inv = self.tick(0.2)
        done = self.tick(latency)
        o = {
            "process": process,
            "op_id": self.op_ids[process],
            "type": EventType(type).value,
            "outcome": outcome,
            "invoke_ns": inv,
            "complete_ns": done,
            "items": items or [],
            **fields,
        }
        self.op_ids[process] += 1
        self.ops.append(o)
        return o

    def _append(
        self,
        tp: tuple[str, int],
        entry_value: str | None,
        writer: str | None,
        txn: int | None,
        status: str,
    ) -> int:
        log = self.logs[tp]
        off = len(log)
        entry = Entry(off, entry_value, writer, txn, status)
        log.append(entry)
        if status == "pending":
            self.first_pending.setdefault(tp, off)
            self.txns[(writer, txn)]["entries"].append(entry)  # type: ignore[index]
        self._note_end(tp)
        return off

    def lso(self, tp: tuple[str, int]) -> int:
        first = self.first_pending.get(tp)
        return len(self.logs[tp]) if first is None else first

    def _note_end(self, tp: tuple[str, int]) -> None:
        self.end_events.append((self.t, tp[0], tp[1], self.lso(tp), len(self.logs[tp])))

    def _end_txn(self, writer: str, txn: int, commit: bool) -> None:
        info = self.txns[(writer, txn)]
        for e in info["entries"]:
            e.status = "committed" if commit else "aborted"
        for tp in sorted(info["partitions"]):
            self.first_pending.pop(tp, None)  # transactions run one at a time
            self._append(tp, None, writer, txn, "marker")
        info["status"] = "committed" if commit else "aborted"

    # -- workloads ------------------------------------------------------------------------

    def run_txn(
        self,
        writer: str,
        txn: int,
        pid: int,
        *,
        abort: bool,
        tp_choices: list[tuple[str, int]],
        records: list[tuple[tuple[str, int], str, str | None]] | None = None,
        group: str | None = None,
        offsets: list[dict[str, Any]] | None = None,
    ) -> None:
        tid = f"tid-{writer}"
        common: dict[str, Any] = {
            "txn": txn,
            "transactional_id": tid,
            "producer_id": pid,
            "producer_epoch": 0,
        }
        self.op(writer, EventType.BEGIN, latency=0.01, **common)
        info: dict[str, Any] = {
            "partitions": set(),
            "values": [],
            "status": "pending",
            "entries": [],
        }
        self.txns[(writer, txn)] = info
        if records is None:
            k = self.rng.randint(1, self.cfg.max_records_per_txn)
            records = [
                (self.rng.choice(tp_choices), encode_value(writer, txn, i), None) for i in range(k)
            ]
        for tp, value, source in records:
            off = self._append(tp, value, writer, txn, "pending")
            info["partitions"].add(tp)
            info["values"].append(value)
            item = {"topic": tp[0], "partition": tp[1], "offset": off, "value": value}
            if source is not None:
                item["source"] = source
            self.op(writer, EventType.SEND, items=[item], group_id=group, **common)
        if offsets:
            self.op(writer, EventType.SEND_OFFSETS, items=offsets, group_id=group, **common)
        end = self.op(writer, EventType.ABORT if abort else EventType.COMMIT, **common)
        info["commit_op"] = end
        self._end_txn(writer, txn, commit=not abort)

    def poll(
        self, process: str, type: EventType = EventType.POLL, limit: int | None = None
    ) -> None:
        pos = self.positions[process]
        items: list[dict[str, Any]] = []
        limit = limit or self.cfg.poll_max
        for tp in sorted(pos):
            lso = self.lso(tp)
            o = pos[tp]
            while o < lso and len(items) < limit:
                e = self.logs[tp][o]
                if e.status == "committed":
                    items.append(
                        {"topic": tp[0], "partition": tp[1], "offset": o, "value": e.value}
                    )
                o += 1
            pos[tp] = o
        if items or type == EventType.POLL:
            fields = {"isolation": "read_committed"}
            if type == EventType.POLL:
                fields["group_id"] = f"g-{process}"
            self.op(process, type, items=items, latency=0.3, **fields)

    def build(self) -> Synth:
        cfg = self.cfg
        tps = [(cfg.topic, p) for p in range(cfg.partitions)]
        writers = [f"w{i}" for i in range(cfg.writers)]
        consumers = [f"c{i}" for i in range(cfg.consumers)]
        for i, w in enumerate(writers):
            self.op(
                w,
                EventType.INIT,
                transactional_id=f"tid-{w}",
                producer_id=1000 + i,
                producer_epoch=0,
            )
        for i, c in enumerate(consumers):
            assigned = [tp for tp in tps if tp[1] % cfg.consumers == i]
            self.positions[c] = {tp: 0 for tp in assigned}
            self.op(
                c,
                EventType.ASSIGN,
                items=[{"topic": t, "partition": p, "offset": 0} for t, p in assigned],
            )
        copier = "copier0"
        group = "copy-group"
        if cfg.copiers:
            self.positions[copier] = {tp: 0 for tp in tps}
            self.op(
                copier,
                EventType.INIT,
                transactional_id=f"tid-{copier}",
                producer_id=2000,
                producer_epoch=0,
            )
            self.op(
                copier,
                EventType.ASSIGN,
                items=[{"topic": t, "partition": p, "offset": 0} for t, p in tps],
                group_id=group,
            )
        schedule = [(w, j) for w in writers for j in range(cfg.txns_per_writer)]
        # writers' transactions interleave in random order but each writer's are in order
        order = sorted(range(len(schedule)), key=lambda k: (self.rng.random(), 0))
        counters = dict.fromkeys(writers, 0)
        idem_left = cfg.idempotent_sends
        copier_txn = 0
        for step, _ in enumerate(order):
            w = self.rng.choice([x for x in writers if counters[x] < cfg.txns_per_writer])
            j = counters[w]
            counters[w] += 1
            self.run_txn(
                w,
                j,
                1000 + writers.index(w),
                abort=self.rng.random() < cfg.abort_rate,
                tp_choices=tps,
            )
            if idem_left and self.rng.random() < 0.5:
                idem_left -= 1
                tp = self.rng.choice(tps)
                val = encode_value("idem0", None, cfg.idempotent_sends - idem_left - 1)
                off = self._append(tp, val, "idem0", None, "committed")
                self.op(
                    "idem0",
                    EventType.SEND,
                    items=[{"topic": tp[0], "partition": tp[1], "offset": off, "value": val}],
                    producer_id=3000,
                    producer_epoch=0,
                )
            for c in consumers:
                if self.rng.random() < 0.7:
                    self.poll(c)
            if cfg.copiers and step % 3 == 2:
                copier_txn = self._copy_step(copier, group, copier_txn)
        # drain
        for c in consumers:
            for _ in range(200):
                before = dict(self.positions[c])
                self.poll(c)
                if self.positions[c] == before:
                    break
        if cfg.copiers:
            for _ in range(200):
                before = dict(self.positions[copier])
                copier_txn = self._copy_step(copier, group, copier_txn)
                if self.positions[copier] == before:
                    break
        if cfg.final_read:
            self.final_read()
        self._final_state()
        if cfg.metrics:
            self._metrics()
        self._nemesis(self.t - cfg.start_ns)
        self._built = True
        return self

    def _copy_step(self, copier: str, group: str, txn: int) -> int:
        pos = self.positions[copier]
        before = dict(pos)
        limit = self.cfg.poll_max
        inputs: list[dict[str, Any]] = []
        for tp in sorted(pos):
            lso = self.lso(tp)
            o = pos[tp]
            while o < lso and len(inputs) < limit:
                e = self.logs[tp][o]
                if e.status == "committed":
                    inputs.append(
                        {"topic": tp[0], "partition": tp[1], "offset": o, "value": e.value}
                    )
                o += 1
            pos[tp] = o
        if pos == before:
            return txn
        self.op(copier, EventType.POLL, items=inputs, group_id=group, isolation="read_committed")
        records = [
            ((self.cfg.out_topic, it["partition"]), encode_value(copier, txn, i), it["value"])
            for i, it in enumerate(inputs)
        ]
        offsets: list[dict[str, Any]] = [
            {"topic": tp[0], "partition": tp[1], "offset": pos[tp]}
            for tp in sorted(pos)
            if pos[tp] != before[tp]
        ]
        self.run_txn(
            copier,
            txn,
            2000,
            abort=False,
            tp_choices=[],
            records=records,
            group=group,
            offsets=offsets,
        )
        for sent in offsets:
            self.group_offsets[(group, sent["topic"], sent["partition"])] = sent["offset"]
        return txn + 1

    def _nemesis(self, span: int) -> None:
        """A nemesis schedule (``schedule.json``, ``at`` counted from the run's start) and the
        fault-log lines it would leave: a delay rule that delays many requests (one line per
        request, grouped by its rule id ``action-0``), a node kill, a producer crash and a
        response drop."""
        frac = span / SEC
        self.schedule = [
            {"at": 0.15 * frac, "kind": "delay", "duration": 0.15 * frac, "node": None,
             "rule": {"link": "client->n1", "ms": 200, "jitter_ms": 50, "api": ["Produce"]},
             "client": None, "origin": "action"},
            {"at": 0.45 * frac, "kind": "kill", "duration": 0.1 * frac, "node": 2, "rule": {},
             "client": None, "origin": "random"},
            {"at": 0.7 * frac, "kind": "crash_producer", "duration": 0.0, "node": None,
             "rule": {}, "client": "transactional_producer", "origin": "action"},
            {"at": 0.8 * frac, "kind": "drop_response", "duration": 0.05 * frac, "node": None,
             "rule": {"link": "client->n0", "probability": 0.5}, "client": None,
             "origin": "random"},
        ]  # fmt: skip
        t0 = self.cfg.start_ns / SEC
        faults: list[dict[str, Any]] = []
        rng = random.Random(self.cfg.seed + 1)
        start = t0 + 0.15 * frac
        while start < t0 + 0.3 * frac:
            ms = 200 + rng.uniform(-50, 50)
            faults.append({
                "kind": "delay", "start": start, "end": start + ms / 1000, "link": "client->n1",
                "target": {"api": "Produce", "direction": "request"},
                "params": {"rule": "action-0", "ms": 200, "applied_ms": round(ms, 3)},
            })  # fmt: skip
            start += 0.004 * frac + rng.uniform(0, 0.004 * frac)
        faults.append({
            "kind": "kill", "start": t0 + 0.45 * frac + 0.002, "end": t0 + 0.55 * frac + 0.3,
            "link": None, "target": {"node": 2, "role": "broker"}, "params": {"launcher": "local"},
        })  # fmt: skip
        faults.append({
            "kind": "crash_producer", "start": t0 + 0.7 * frac, "end": t0 + 0.7 * frac + 0.4,
            "link": None, "target": {"client": "crash-3-transactional_producer"},
            "params": {"hold": "before-commit", "at": "commit", "action": 2},
        })  # fmt: skip
        for k in range(3):
            at = t0 + (0.8 + 0.015 * k) * frac
            faults.append({
                "kind": "drop_response", "start": at, "end": at, "link": "client->n0",
                "target": {"api": "Fetch", "direction": "response"},
                "params": {"rule": "action-3", "probability": 0.5},
            })  # fmt: skip
        self.faults = faults
        # the nemesis log: every action applied; the kill's heal (a restart) failed once and
        # the final heal's retry healed it
        steps: list[tuple[int, str, str | None]] = [(0, "apply", None), (0, "heal", None)]
        steps += [(1, "apply", None)]
        steps += [(1, "heal", "restart of node 2 timed out after 90 s"), (2, "apply", None)]
        steps += [(3, "apply", None), (3, "heal", None), (1, "heal_retry", None)]
        self.nemesis_log = []
        for action, step, error in steps:
            a = self.schedule[action]
            due = a["at"] + (0 if step == "apply" else a["duration"])
            self.nemesis_log.append({
                "action": action, "kind": a["kind"], "step": step, "at": round(due, 3),
                "start": t0 + due, "end": t0 + due + 0.01, "error": error,
            })  # fmt: skip

    def final_read(self) -> None:
        proc = "final-reader"
        self.op(proc, EventType.START)
        for tp in sorted(self.logs):
            self.op(
                proc, EventType.ASSIGN, items=[{"topic": tp[0], "partition": tp[1], "offset": 0}]
            )
            self.positions[proc] = {tp: 0}
            for _ in range(len(self.logs[tp]) + 1):
                before = self.positions[proc][tp]
                self.poll(proc, EventType.FINAL_READ, limit=100)
                if self.positions[proc][tp] == before:
                    break

    def _final_state(self) -> None:
        parts = []
        for tp in sorted(self.logs):
            parts.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "lso": self.lso(tp),
                    "high_watermark": len(self.logs[tp]),
                    "log_start_offset": 0,
                    "leader": f"n{tp[1] % self.cfg.nodes}",
                    "replicas": [f"n{tp[1] % self.cfg.nodes}"],
                }
            )
        coord = []
        last: dict[str, tuple[int, str]] = {}
        for (w, j), info in self.txns.items():
            if w not in last or j > last[w][0]:
                last[w] = (j, info["status"])
        for w, (_, status) in sorted(last.items()):
            coord.append(
                {
                    "transactional_id": f"tid-{w}",
                    "producer_id": 0,
                    "producer_epoch": 0,
                    "state": "CompleteCommit" if status == "committed" else "CompleteAbort",
                    "timeout_ms": self.cfg.transaction_timeout_ms,
                    "partitions": [],
                }
            )
        self.t += SEC
        self.final_state = {
            "captured_ns": self.t,
            "partitions": parts,
            "open_transactions": [],
            "coordinator_transactions": coord,
            "group_offsets": [
                {"group_id": g, "topic": t, "partition": p, "offset": o}
                for (g, t, p), o in sorted(self.group_offsets.items())
            ],
        }

    def _metrics(self) -> None:
        cfg = self.cfg
        start, end = cfg.start_ns, self.t
        events = sorted(self.end_events)
        state: dict[tuple[str, int], tuple[int, int]] = {tp: (0, 0) for tp in self.logs}
        i = 0
        committed = aborted = 0
        ends = sorted(
            (o["complete_ns"], o["type"])
            for o in self.ops
            if o["type"] in ("commit", "abort") and o["outcome"] == "ok"
        )
        k = 0
        writers_by_node: dict[str, set[int]] = defaultdict(set)
        pid_of = {w: 1000 + int(w[1:]) for w in (f"w{i}" for i in range(cfg.writers))}
        pid_of["copier0"] = 2000
        pid_of["idem0"] = 3000
        for tp, log in self.logs.items():
            for e in log:
                if e.writer is not None and e.value is not None:
                    writers_by_node[f"n{tp[1] % cfg.nodes}"].add(pid_of.get(e.writer, 0))
        rows = self.metric_rows
        t = start
        while t <= end + SEC:
            while i < len(events) and events[i][0] <= t:
                _, topic, part, lso, hw = events[i]
                state[(topic, part)] = (lso, hw)
                i += 1
            while k < len(ends) and ends[k][0] <= t:
                if ends[k][1] == "commit":
                    committed += 1
                else:
                    aborted += 1
                k += 1
            for (topic, part), (lso, hw) in state.items():
                lab = {"topic": topic, "partition": part}
                rows.append(
                    {
                        "time_ns": t,
                        "node": "harness",
                        "name": MetricName.HARNESS_LSO.value,
                        **lab,
                        "value": float(lso),
                    }
                )
                rows.append(
                    {
                        "time_ns": t,
                        "node": "harness",
                        "name": MetricName.HARNESS_HIGH_WATERMARK.value,
                        **lab,
                        "value": float(hw),
                    }
                )
                rows.append(
                    {
                        "time_ns": t,
                        "node": f"n{part % cfg.nodes}",
                        "name": MetricName.LAST_STABLE_OFFSET_LAG.value,
                        **lab,
                        "value": float(hw - lso),
                    }
                )
            for n in range(cfg.nodes):
                node = f"n{n}"
                rows.append(
                    {
                        "time_ns": t,
                        "node": node,
                        "name": MetricName.PARTITIONS_WITH_LATE_TXNS.value,
                        "value": 0.0,
                    }
                )
                rows.append(
                    {
                        "time_ns": t,
                        "node": node,
                        "name": MetricName.PRODUCER_ID_COUNT.value,
                        "value": float(len(writers_by_node[node])) if t >= end else 0.0,
                    }
                )
            rows.append(
                {
                    "time_ns": t,
                    "node": "n0",
                    "name": MetricName.TXNS_COMMITTED.value,
                    "value": float(committed),
                }
            )
            rows.append(
                {
                    "time_ns": t,
                    "node": "n0",
                    "name": MetricName.TXNS_ABORTED.value,
                    "value": float(aborted),
                }
            )
            t += SEC

    # -- helpers for injection --------------------------------------------------------------

    def committed_txns(
        self, min_records: int = 1, writer_prefix: str = "w"
    ) -> list[tuple[str, int]]:
        return [
            k
            for k, v in self.txns.items()
            if v["status"] == "committed"
            and len(v["values"]) >= min_records
            and k[0].startswith(writer_prefix)
        ]

    def aborted_txns(self) -> list[tuple[str, int]]:
        return [k for k, v in self.txns.items() if v["status"] == "aborted"]

    def _locate(self, value: str) -> tuple[str, int, int]:
        for (topic, part), log in sorted(self.logs.items()):
            for e in log:
                if e.value == value:
                    return topic, part, e.offset
        raise KeyError(value)

    def reads_of(
        self, value: str, types: tuple[str, ...] = ("poll", "final_read")
    ) -> list[dict[str, Any]]:
        return [
            o
            for o in self.ops
            if o["type"] in types and any(it.get("value") == value for it in o["items"])
        ]

    def _drop_reads(
        self,
        value: str,
        types: tuple[str, ...] = ("poll", "final_read"),
        process: str | None = None,
    ) -> int:
        n = 0
        for o in self.ops:
            if o["type"] in types and (process is None or o["process"] == process):
                before = len(o["items"])
                o["items"] = [it for it in o["items"] if it.get("value") != value]
                n += before - len(o["items"])
        return n

    def _sends_of(self, writer: str, txn: int) -> list[dict[str, Any]]:
        return [
            o
            for o in self.ops
            if o["process"] == writer and o["type"] == "send" and o.get("txn") == txn
        ]

    def _new_read(self, process: str, items: list[dict[str, Any]], at_ns: int) -> None:
        self.ops.append(
            {
                "process": process,
                "op_id": self.op_ids[process],
                "type": "poll",
                "outcome": "ok",
                "invoke_ns": at_ns - MS,
                "complete_ns": at_ns,
                "items": items,
                "isolation": "read_committed",
            }
        )
        self.op_ids[process] += 1

    # -- injections (each plants exactly one anomaly) ----------------------------------------

    def inject_aborted_read(self) -> str:
        w, j = self.aborted_txns()[0]
        v = self.txns[(w, j)]["values"][0]
        topic, part, off = self._locate(v)
        self._new_read(
            "x-aborted",
            [{"topic": topic, "partition": part, "offset": off, "value": v}],
            self.txns[(w, j)]["commit_op"]["complete_ns"] + MS,
        )
        return v

    def inject_fenced_commit(self) -> str:
        """A newer instance of a committing writer's transactional id initialised (in a
        process of its own) between the writer's init and that commit's invocation: the
        commit was acknowledged to a zombie."""
        w, j = next(
            k
            for k in reversed(self.committed_txns())
            if self.txns[k]["commit_op"]["outcome"] == "ok"
        )
        commit = self.txns[(w, j)]["commit_op"]
        tid = commit.get("transactional_id") or f"tid-{w}"
        process = f"x-newer-{w}"
        self.ops.append(
            {
                "process": process,
                "op_id": self.op_ids[process],
                "type": EventType.INIT.value,
                "outcome": "ok",
                "invoke_ns": commit["invoke_ns"] - 3 * MS,
                "complete_ns": commit["invoke_ns"] - MS,
                "items": [],
                "transactional_id": tid,
            }
        )
        self.op_ids[process] += 1
        return tid

    def _probe(self, outcome: str, at_ns: int, value: str | None) -> dict[str, Any]:
        """A hostile client's probe (a sequence gap in its transaction) answered ``outcome``."""
        process = "x-hostile"
        item: dict[str, Any] = {"key": "sequence_gap", "source": "OUT_OF_ORDER_SEQUENCE_NUMBER"}
        if value is not None:
            item.update({"topic": "x-probes", "partition": 0, "value": value})
        op = {
            "process": process,
            "op_id": self.op_ids[process],
            "type": EventType.PROBE.value,
            "outcome": outcome,
            "invoke_ns": at_ns - MS,
            "complete_ns": at_ns,
            "items": [item],
            "transactional_id": "x-hostile",
            "producer_id": 9_999,
            "producer_epoch": 3,
            "txn": 0,
        }
        if outcome != "ok":
            op["error"] = "OUT_OF_ORDER_SEQUENCE_NUMBER (45)"
        self.ops.append(op)
        self.op_ids[process] += 1
        return op

    def inject_refused_request_accepted(self) -> str:
        """A hostile client's probe (no record: an EndTxn) that the cluster answered ok."""
        w, j = self.committed_txns()[0]
        self._probe("ok", self.txns[(w, j)]["commit_op"]["complete_ns"] + MS, None)
        return "x-hostile"

    def inject_refused_write_visible(self) -> str:
        """A hostile client's refused probe whose record two readers saw anyway."""
        w, j = self.committed_txns()[-1]
        at = self.txns[(w, j)]["commit_op"]["complete_ns"]
        value = f"x-hostile|probe|sequence_gap|{self.op_ids['x-hostile']}"
        self._probe("fail", at, value)
        item = {"topic": "x-probes", "partition": 0, "offset": 0, "value": value}
        self._new_read("x-probe-reader-b", [dict(item)], at + 4 * MS)
        self._new_read("x-probe-reader-a", [dict(item)], at + 2 * MS)
        return value

    def inject_never_written_read(self) -> str:
        """Two readers get a record nobody sent (a torn batch recovery kept) past the end of a
        partition's log."""
        w, j = self.committed_txns()[-1]
        topic, part, _ = self._locate(self.txns[(w, j)]["values"][0])
        value = "torn|batch|kept|0"
        item = {"topic": topic, "partition": part, "offset": len(self.logs[(topic, part)]) + 500}
        at = self.txns[(w, j)]["commit_op"]["complete_ns"]
        self._new_read("x-phantom-b", [{**item, "value": value}], at + 3 * MS)
        self._new_read("x-phantom-a", [{**item, "value": value}], at + 2 * MS)
        return value

    def inject_wrong_partition_read(self) -> str:
        """A committed record read again in a topic it was never sent to (records moved
        between partitions)."""
        w, j = self.committed_txns()[0]
        v = self.txns[(w, j)]["values"][0]
        at = self.txns[(w, j)]["commit_op"]["complete_ns"]
        item = {"topic": "x-elsewhere", "partition": 0, "offset": 7, "value": v}
        self._new_read("x-phantom-c", [item], at + MS)
        return v

    def inject_wrong_key_read(self) -> str:
        """A committed record read at its place with a key its send did not carry."""
        w, j = self.committed_txns()[-1]
        send = self._sends_of(w, j)[0]
        send["items"][0]["key"] = "sent-key"
        v = send["items"][0]["value"]
        topic, part, off = self._locate(v)
        at = self.txns[(w, j)]["commit_op"]["complete_ns"]
        item = {"topic": topic, "partition": part, "offset": off, "value": v, "key": "other-key"}
        self._new_read("x-phantom-d", [item], at + MS)
        return v

    def inject_committed_offset_lost(self) -> str:
        """The cluster ends with a copier group's offset one below what its last committed
        transaction sent (a committed offset lost)."""
        entry = self.final_state["group_offsets"][0]
        entry["offset"] -= 1
        return str(entry["group_id"])

    def inject_precommitted_read(self) -> str:
        w, j = self.committed_txns()[0]
        v = self.txns[(w, j)]["values"][0]
        topic, part, off = self._locate(v)
        self._new_read(
            "x-early",
            [{"topic": topic, "partition": part, "offset": off, "value": v}],
            self.txns[(w, j)]["commit_op"]["invoke_ns"] - MS,
        )
        return v

    def inject_lost_write(self) -> str:
        w, j = self.committed_txns()[-1]
        v = self.txns[(w, j)]["values"][0]
        self._drop_reads(v)
        return v

    def inject_duplicate_offset(self) -> str:
        """A committed value appears again at a new offset at the end of its partition."""
        w, j = self.committed_txns()[0]
        v = self.txns[(w, j)]["values"][0]
        topic, part, _ = self._locate(v)
        off = self._append((topic, part), v, w, j, "committed")
        fr = [
            o
            for o in self.ops
            if o["type"] == "final_read"
            and o["items"]
            and o["items"][0]["topic"] == topic
            and o["items"][0]["partition"] == part
        ]
        fr[-1]["items"].append({"topic": topic, "partition": part, "offset": off, "value": v})
        for p in self.final_state["partitions"]:
            if (p["topic"], p["partition"]) == (topic, part):
                p["lso"] = p["high_watermark"] = off + 1
        return v

    def inject_duplicate_redelivery(self) -> str:
        """One consumer gets a record it already had again, with no rewind in between."""
        polls = [
            o
            for o in self.ops
            if o["type"] == "poll" and o["process"].startswith("c") and o["items"]
        ]
        first = polls[0]
        later = next(
            o for o in polls if o["process"] == first["process"] and o["op_id"] > first["op_id"]
        )
        later["items"].append(dict(first["items"][0]))
        return first["items"][0]["value"]

    def inject_inconsistent_offset(self) -> str:
        """An ack claims an offset that the log (and the reads) hold a different value at."""
        w, j = self.committed_txns(min_records=2)[0]
        sends = self._sends_of(w, j)
        a, b = sends[0]["items"][0], sends[1]["items"][0]
        # point a's ack at a fresh offset far past the log end, holding another value in reads
        topic, part = a["topic"], a["partition"]
        other_val = encode_value("ghost", None, 0)
        bogus = len(self.logs[(topic, part)]) + 1000
        a["offset"] = bogus
        self._new_read(
            "x-ghost",
            [{"topic": topic, "partition": part, "offset": bogus, "value": other_val}],
            self.t,
        )
        return f"{topic}/{part}@{bogus} ({b['value']})"

    def inject_nonmonotonic_poll(self) -> str:
        for o in self.ops:
            if o["type"] == "poll" and o["process"].startswith("c"):
                its = o["items"]
                for i in range(len(its) - 1):
                    if (its[i]["topic"], its[i]["partition"]) == (
                        its[i + 1]["topic"],
                        its[i + 1]["partition"],
                    ):
                        its[i], its[i + 1] = its[i + 1], its[i]
                        return its[i]["value"]
        raise RuntimeError("no poll with two records of one partition")

    def inject_skipped_offset(self) -> str:
        """One consumer silently misses a committed record in the middle of its reads."""
        c = "c0"
        polls = [o for o in self.ops if o["type"] == "poll" and o["process"] == c and o["items"]]
        mid = polls[len(polls) // 2]
        first = mid["items"][0]
        tp = (first["topic"], first["partition"])
        # make sure the consumer read something later in the same partition
        assert any(
            (it["topic"], it["partition"]) == tp and it["offset"] > first["offset"]
            for o in polls
            for it in o["items"]
        )
        mid["items"] = mid["items"][1:]
        return first["value"]

    def inject_producer_reorder(self) -> str:
        """Two consecutive sends of one producer to one partition acked out of order."""
        by_tp: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
        for o in self.ops:
            if (
                o["type"] == "send"
                and o["process"].startswith("w")
                and self.txns[(o["process"], o["txn"])]["status"] == "committed"
            ):
                it = o["items"][0]
                by_tp[(it["topic"], it["partition"], o["process"])].append(o)
        for sends in by_tp.values():
            if len(sends) >= 2:
                a, b = sends[0]["items"][0], sends[1]["items"][0]
                a["offset"], b["offset"] = b["offset"], a["offset"]
                # the log holds b before a: reads return b at a's old offset and a at b's
                va, vb = a["value"], b["value"]
                for o in self.ops:
                    if o["type"] in ("poll", "final_read"):
                        for it in o["items"]:
                            if it.get("value") == va:
                                it["value"] = vb
                            elif it.get("value") == vb:
                                it["value"] = va
                return f"{a['value']} / {b['value']}"
        raise RuntimeError("no producer with two committed sends to one partition")

    def inject_torn_transaction(self) -> str:
        """A consumer reads a committed transaction's records in a partition but one is missing."""
        for w, j in self.committed_txns(min_records=2):
            by_tp: dict[tuple[str, int], list[str]] = defaultdict(list)
            for v in self.txns[(w, j)]["values"]:
                t, p, _ = self._locate(v)
                by_tp[(t, p)].append(v)
            for (_topic, p), vals in by_tp.items():
                if len(vals) >= 2 and p % self.cfg.consumers == 0:
                    reads = self.reads_of(vals[-1], ("poll",))
                    readers = {o["process"] for o in reads if o["process"].startswith("c")}
                    if readers:
                        self._drop_reads(vals[-1], ("poll",), process=sorted(readers)[0])
                        return vals[-1]
        raise RuntimeError("no multi-record transaction in one partition")

    def inject_ctp_duplicate_output(
        self, source: str | None = None, group: str = "copy-group"
    ) -> str:
        """A second committed output for an input record already copied (the first copied, or
        the one whose value is ``source``), written under ``group`` (another group's output
        is no duplicate: each group copies every input once)."""
        out = next(
            o
            for o in self.ops
            if o["process"] == "copier0"
            and o["type"] == "send"
            and source in (None, o["items"][0]["source"])
        )
        src = out["items"][0]["source"]
        txn = max(j for (w, j) in self.txns if w == "copier0") + 1
        tp = (out["items"][0]["topic"], out["items"][0]["partition"])
        self.run_txn(
            "copier0",
            txn,
            2000,
            abort=False,
            tp_choices=[],
            records=[(tp, encode_value("copier0", txn, 0), src)],
            group=group,
        )
        val = encode_value("copier0", txn, 0)
        off = self._locate(val)[2]
        fr = [
            o
            for o in self.ops
            if o["type"] == "final_read"
            and o["items"]
            and (o["items"][0]["topic"], o["items"][0]["partition"]) == tp
        ]
        fr[-1]["items"].append({"topic": tp[0], "partition": tp[1], "offset": off, "value": val})
        fr[-1]["invoke_ns"], fr[-1]["complete_ns"] = self.tick(), self.tick()
        for p in self.final_state["partitions"]:
            if (p["topic"], p["partition"]) == tp:
                p["lso"] = p["high_watermark"] = len(self.logs[tp])
        last_t = max(r["time_ns"] for r in self.metric_rows)
        for r in self.metric_rows:
            if r["time_ns"] == last_t and r["name"] == MetricName.TXNS_COMMITTED.value:
                r["value"] += 1
        return src

    def inject_ctp_output_ahead(self, duplicate: bool = False) -> str:
        """The copier's last offset commit in a partition stops at (not past) the last input it
        copied there, though that input's output committed; with ``duplicate`` that input also
        gets a second output (one input, two anomaly kinds)."""
        commit = [o for o in self.ops if o["process"] == "copier0" and o["type"] == "send_offsets"]
        item = commit[-1]["items"][0]
        tp = (item["topic"], item["partition"])
        last = max(
            (
                it
                for o in self.ops
                if o["process"] == "copier0" and o["type"] == "poll"
                for it in o["items"]
                if (it["topic"], it["partition"]) == tp and it["offset"] < item["offset"]
            ),
            key=lambda it: it["offset"],
        )
        item["offset"] = last["offset"]
        if duplicate:
            self.inject_ctp_duplicate_output(last["value"])
        return str(last["value"])

    def inject_ctp_missing_output(self) -> str:
        out = next(o for o in self.ops if o["process"] == "copier0" and o["type"] == "send")
        self._drop_reads(out["items"][0]["value"], ("final_read",))
        return out["items"][0]["source"]

    def inject_indeterminate_partial(self) -> str:
        """A commit of unknown outcome whose records are only partly visible."""
        w, j = self.committed_txns(min_records=2)[-1]
        self.txns[(w, j)]["commit_op"]["outcome"] = "info"
        self.txns[(w, j)]["commit_op"]["error"] = "TIMED_OUT"
        self._drop_reads(self.txns[(w, j)]["values"][0])
        return f"{w}/{j}"

    def make_indeterminate_whole(self, visible: bool) -> str:
        """Not an anomaly: a commit of unknown outcome, wholly visible (or wholly invisible)."""
        pick = self.committed_txns()[0] if visible else self.aborted_txns()[0]
        op = self.txns[pick]["commit_op"]
        op["type"] = "commit"
        op["outcome"] = "info"
        return f"{pick[0]}/{pick[1]}"

    def add_purged_abort(self) -> str:
        """Not an anomaly: a transaction whose only send failed before reaching a broker (purged
        unsent), then aborted.  librdkafka sends no EndTxn for it, so the coordinator never
        counts the abort (the synthetic counters, computed at build time, do not either)."""
        writer = "w-purged"
        common: dict[str, Any] = {
            "txn": 0,
            "transactional_id": f"tid-{writer}",
            "producer_id": 4000,
        }
        self.op(writer, EventType.BEGIN, latency=0.01, **common)
        tp = (self.cfg.topic, 0)
        item = {"topic": tp[0], "partition": tp[1], "value": encode_value(writer, 0, 0)}
        self.op(writer, EventType.SEND, "fail", [item], error="_PURGE_QUEUE", **common)
        self.op(writer, EventType.ABORT, **common)
        return f"{writer}/0"

    def kill_counting_node(self, missed_after_restart: bool = False) -> str:
        """Not an anomaly: the counting node (n0) killed just before a scrape and restarted
        1.5 s later.  The commits and aborts it completed since its last scrape are lost with
        its process; the new process counts from zero what completes after the kill.
        ``missed_after_restart``: an anomaly, the new process counts one commit less than
        were invoked after its restart (a real under-count).  Returns the kill's time."""
        ends = sorted(
            (o["complete_ns"], o["type"], o["invoke_ns"])
            for o in self.ops
            if o["type"] in ("commit", "abort") and o["outcome"] == "ok"
        )
        names = {MetricName.TXNS_COMMITTED.value: "commit", MetricName.TXNS_ABORTED.value: "abort"}

        def counter(r: dict[str, Any]) -> bool:
            return r["node"] == "n0" and r["name"] in names

        ticks = sorted({r["time_ns"] for r in self.metric_rows if counter(r)})
        q = len(ticks) // 4
        kill = next(
            b - MS
            for a, b in zip(ticks[q:], ticks[q + 1 :], strict=False)
            if any(a < t <= b - 2 * MS and k == "commit" for t, k, _ in ends)
        )
        back = kill + 3 * SEC // 2
        kept = [r for r in self.metric_rows if not counter(r) or r["time_ns"] < kill]
        since = back if missed_after_restart else kill
        for t in (t for t in ticks if t > back):
            for name, kind in names.items():
                n = sum(1 for c, k, i in ends if k == kind and kill < c <= t and i > since)
                if missed_after_restart and kind == "commit":
                    n = max(0, n - 1)
                kept.append({"time_ns": t, "node": "n0", "name": name, "value": float(n)})
        self.metric_rows = kept
        target = {"node": 0, "role": "coordinator"}
        self.faults.append({
            "kind": "kill", "start": kill / SEC, "end": kill / SEC + 0.05, "link": None,
            "target": target, "params": {"launcher": "local"},
        })  # fmt: skip
        self.faults.append({
            "kind": "restart", "start": back / SEC - 0.5, "end": back / SEC, "link": None,
            "target": target, "params": {"launcher": "local"},
        })  # fmt: skip
        return f"n0 killed at {kill}"

    def inject_counter_undercount(self) -> str:
        """A coordinator that misses a commit, with no restart: TransactionsCommitted one short
        from the middle of the run on."""
        rows = [
            r
            for r in self.metric_rows
            if r["node"] == "n0" and r["name"] == MetricName.TXNS_COMMITTED.value
        ]
        mid = sorted(r["time_ns"] for r in rows)[len(rows) // 2]
        for r in rows:
            if r["time_ns"] >= mid and r["value"] > 0:
                r["value"] -= 1
        return f"n0 counts one commit less from {mid}"

    def inject_hanging_at_end(self) -> str:
        """A partition left with LSO < high watermark by an open transaction."""
        p = self.final_state["partitions"][0]
        p["high_watermark"] += 3
        self.final_state["open_transactions"].append(
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "producer_id": 4242,
                "producer_epoch": 0,
                "first_offset": p["lso"],
                "start_ns": self.final_state["captured_ns"] - 10 * SEC,
            }
        )
        return f"{p['topic']}/{p['partition']}"

    def inject_stale_open_transaction(self) -> str:
        """An open transaction older than transaction.max.timeout.ms (on a partition whose
        LSO equals its high watermark, so only this rule fires)."""
        p = self.final_state["partitions"][-1]
        age = (self.cfg.transaction_max_timeout_ms + 60_000) * MS
        self.final_state["open_transactions"].append(
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "producer_id": 4343,
                "producer_epoch": 0,
                "first_offset": p["lso"],
                "start_ns": self.final_state["captured_ns"] - age,
            }
        )
        self.final_state["coordinator_transactions"].append(
            {
                "transactional_id": "tid-zombie",
                "producer_id": 4343,
                "producer_epoch": 0,
                "state": "Ongoing",
                "timeout_ms": self.cfg.transaction_timeout_ms,
                "start_ns": self.final_state["captured_ns"] - age,
                "partitions": [{"topic": p["topic"], "partition": p["partition"]}],
            }
        )
        return "pid 4343"

    def inject_coordinator_mismatch(self) -> str:
        """A partition holds an open transaction the coordinator does not know as ongoing."""
        p = self.final_state["partitions"][1]
        self.final_state["open_transactions"].append(
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "producer_id": 4444,
                "producer_epoch": 0,
                "first_offset": p["lso"],
                "start_ns": self.final_state["captured_ns"] - SEC,
            }
        )
        return "pid 4444"

    def inject_lso_stall(self) -> str:
        """Harness samples: one partition's LSO stands still while its HW moves, for longer
        than the transaction timeout allows."""
        topic, part = self.cfg.topic, 0
        base = self.cfg.start_ns
        dur = (self.cfg.transaction_timeout_ms + 30_000) // 1000 + 20
        for s in range(dur):
            t = base + s * SEC + SEC // 2
            lab = {"topic": "stall-topic", "partition": part}
            self.extra_metrics.append(
                {
                    "time_ns": t,
                    "node": "harness",
                    "name": MetricName.HARNESS_LSO.value,
                    **lab,
                    "value": 5.0,
                }
            )
            self.extra_metrics.append(
                {
                    "time_ns": t,
                    "node": "harness",
                    "name": MetricName.HARNESS_HIGH_WATERMARK.value,
                    **lab,
                    "value": float(5 + s),
                }
            )
        return f"{topic}/{part}"

    def add_idle_partition_then_short_lag(self) -> str:
        """Harness samples, not an anomaly: a partition idle (LSO = high watermark) for longer
        than the transaction timeout allows, then a transaction open for 5 s at the end."""
        part = 0
        idle = (self.cfg.transaction_timeout_ms + 30_000) // 1000 + 20
        for s in range(idle + 5):
            t = self.cfg.start_ns + s * SEC + SEC // 2
            lab = {"topic": "idle-topic", "partition": part}
            hw = 5.0 if s < idle else 6.0 + s - idle
            for name, value in (
                (MetricName.HARNESS_LSO.value, 5.0),
                (MetricName.HARNESS_HIGH_WATERMARK.value, hw),
            ):
                self.extra_metrics.append(
                    {"time_ns": t, "node": "harness", "name": name, **lab, "value": value}
                )
        return f"idle-topic/{part}"

    def inject_metric_lso_lag(self) -> str:
        """The cluster reports a LastStableOffsetLag that the final state contradicts."""
        last_t = max(r["time_ns"] for r in self.metric_rows)
        p = self.final_state["partitions"][0]
        for r in self.metric_rows:
            if (
                r["time_ns"] == last_t
                and r["name"] == MetricName.LAST_STABLE_OFFSET_LAG.value
                and (r["topic"], r["partition"]) == (p["topic"], p["partition"])
            ):
                r["value"] = 7.0
        return f"{p['topic']}/{p['partition']}"

    def inject_metric_late_txns(self) -> str:
        last_t = max(r["time_ns"] for r in self.metric_rows)
        for r in self.metric_rows:
            if (
                r["time_ns"] == last_t
                and r["name"] == MetricName.PARTITIONS_WITH_LATE_TXNS.value
                and r["node"] == "n0"
            ):
                r["value"] = 1.0
        return "n0"

    # -- output ---------------------------------------------------------------------------

    def history_table(self) -> pa.Table:
        rows = []
        keys = OP_ARROW_SCHEMA.names
        for o in self.ops:
            r = {k: o.get(k) for k in keys}
            r["items"] = o["items"] or None
            rows.append(r)
        ops = pa.Table.from_pylist(rows, schema=OP_ARROW_SCHEMA)
        return sort_history(flatten_ops(ops))

    def metrics_table(self) -> pa.Table:
        rows = [dict(r) for r in self.metric_rows + self.extra_metrics]
        for r in rows:
            r.setdefault("topic", None)
            r.setdefault("partition", None)
            if r["topic"] is not None:
                r["labels"] = json.dumps({"topic": r["topic"], "partition": str(r["partition"])})
        return pa.Table.from_pylist(rows, schema=METRIC_ARROW_SCHEMA)

    def run_info(self) -> dict[str, Any]:
        return {
            "scenario": "synthetic",
            "seed": self.cfg.seed,
            "started_ns": self.cfg.start_ns,
            "workload_started_ns": self.cfg.start_ns,
            "ended_ns": self.t,
            "cluster_kind": "synthetic",
            "transaction_timeout_ms": self.cfg.transaction_timeout_ms,
            "transaction_max_timeout_ms": self.cfg.transaction_max_timeout_ms,
            "metrics_supported": self.cfg.metrics,
            "complete": True,
        }

    def write(self, run_dir: str | Path, history: pa.Table | None = None) -> Path:
        root = Path(run_dir)
        root.mkdir(parents=True, exist_ok=True)
        write_run_info(root, **self.run_info())
        write_history_parquet(
            history if history is not None else self.history_table(), root / "history.parquet"
        )
        fs_path = root / FINAL_STATE_JSON
        write_final_state(fs_path, parse_final_state(self.final_state, fs_path))
        with (root / FAULTS_JSONL).open("w") as fh:
            for f in self.faults:
                fh.write(json.dumps(f) + "\n")
        write_json(root / SCHEDULE_JSON, self.schedule)
        with (root / NEMESIS_LOG).open("w") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in self.nemesis_log)
        if self.cfg.metrics:
            pq.write_table(self.metrics_table(), root / METRICS_PARQUET)
        return root


def replicate(table: pa.Table, copies: int) -> pa.Table:
    """``copies`` disjoint copies of a flat history: processes, topics, groups and values are
    prefixed ``r<k>.`` so every copy is a valid, independent history (used to scale benches)."""
    parts = []
    for k in range(copies):
        prefix = pa.scalar(f"r{k}.")
        cols = {}
        for name in table.column_names:
            col = table[name]
            if name in ("process", "topic", "group_id", "transactional_id", "value", "source"):
                col = pc.binary_join_element_wise(prefix, col, "")
            cols[name] = col
        parts.append(pa.table(cols, schema=table.schema))
    return pa.concat_tables(parts)


def replicate_state(state: dict[str, Any], copies: int) -> dict[str, Any]:
    out = {**state, "partitions": [], "open_transactions": [], "coordinator_transactions": []}
    for k in range(copies):
        pre = f"r{k}."
        out["partitions"] += [{**p, "topic": pre + p["topic"]} for p in state["partitions"]]
        out["open_transactions"] += [
            {**p, "topic": pre + p["topic"]} for p in state["open_transactions"]
        ]
        out["coordinator_transactions"] += [
            {**c, "transactional_id": pre + c["transactional_id"]}
            for c in state.get("coordinator_transactions") or []
        ]
    return out
