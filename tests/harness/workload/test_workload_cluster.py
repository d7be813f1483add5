"""Each workload user against a real local cluster, through the locust runner, for a few seconds.

Checks the history contract end to end: every JSON Lines line parses with the schema and the
run compacts; every send has an ack offset; polls record their records; the final
read_committed read agrees with what was acknowledged and committed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from txnchaos.harness.workload.final_read import final_read
from txnchaos.rundir.schema import decode_value

from .conftest import run_workload
from .helpers import compacted, happened, jsonl_lines, ops_so_far

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def check_process_order(lines: list[dict[str, Any]]) -> None:
    """op_ids of invocation/one-step lines strictly increase per process."""
    seen: dict[str, int] = {}
    opened: set[tuple[str, int]] = set()
    for r in lines:
        key = (r["process"], r["op_id"])
        if key in opened:  # completion line of an earlier invocation
            opened.discard(key)
            continue
        assert r["op_id"] > seen.get(r["process"], -1), r
        seen[r["process"]] = r["op_id"]
        if r.get("outcome") is None:
            opened.add(key)


def rows_of(rows: list[dict[str, Any]], type_: str, prefix: str = "") -> list[dict[str, Any]]:
    return [r for r in rows if r["type"] == type_ and r["process"].startswith(prefix)]


def _idempotent_ops_seen(run: Path) -> bool:
    """What the idempotent test reads back has happened: both consumers polled records and the
    subscribed one committed offsets."""
    ops = ops_so_far(run)
    polled = {r["process"] for r in ops if r["type"] == "poll" and r.get("items")}
    return {"sub-0", "asg-0"} <= polled and any(
        r["type"] == "commit_offsets" and r["process"] == "sub-0" for r in ops
    )


def _transactional_ops_seen(run: Path) -> bool:
    """Both outcomes of the producers' transactions and the copier's offsets have happened."""
    return (
        happened(run, "commit", "txn-producer")
        and happened(run, "abort", "txn-producer")
        and happened(run, "send_offsets", "copier")
    )


def test_idempotent_producer_and_consumers(wl_bootstrap: str, tmp_path: Path, uniq: str) -> None:
    topic = f"idem-{uniq}"
    config = {
        "topics": [{"name": topic, "partitions": 3}],
        "users": [
            {"kind": "idempotent_producer", "topics": [topic], "count": 2, "rate": 20},
            {
                "kind": "read_committed_consumer",
                "name": "sub",
                "topics": [topic],
                "mode": "subscribe",
                "group_id": f"g-{uniq}",
            },
            {"kind": "read_committed_consumer", "name": "asg", "topics": [topic], "mode": "assign"},
        ],
    }
    run = tmp_path / "run"
    stats = run_workload(config, run, wl_bootstrap, 4, until=_idempotent_ops_seen)
    assert stats["requests"] > 0 and stats["failures"] == 0, stats
    assert {"idempotent/send", "consumer/poll"} <= set(stats["by_name"])

    result = final_read(wl_bootstrap, {topic: 3}, run, timeout_s=60)
    assert result.complete, result.to_dict()

    for f in (run / "history").glob("*.jsonl"):
        check_process_order([r for r in jsonl_lines(run) if f.stem == r["process"]])
    rows = compacted(run)
    procs = {r["process"] for r in rows}
    assert {"idem-producer-0", "idem-producer-1", "sub-0", "asg-0", "final-reader"} <= procs
    for p in procs:
        types = [r["type"] for r in sorted(rows, key=lambda r: r["op_id"]) if r["process"] == p]
        assert types[0] == "start" and types[-1] == "stop", (p, types[:3], types[-3:])

    sends = rows_of(rows, "send")
    assert sends and all(r["outcome"] == "ok" and r["offset"] is not None for r in sends)
    assert all(r["txn"] is None and decode_value(r["value"])[1] is None for r in sends)
    acked = {(r["partition"], r["offset"]): r["value"] for r in sends}
    assert len(acked) == len(sends)  # no offset acked twice

    final = rows_of(rows, "final_read")
    read = {(r["partition"], r["offset"]): r["value"] for r in final if r["value"]}
    assert len(read) == len([r for r in final if r["value"]])
    assert read == acked  # exactly the acknowledged records, each once, at its acked offset

    for consumer in ("sub-0", "asg-0"):
        polled = [r for r in rows_of(rows, "poll", consumer) if r["value"] is not None]
        assert polled, f"{consumer} recorded no records"
        assert all(r["isolation"] == "read_committed" for r in polled)
        for r in polled:
            assert acked[(r["partition"], r["offset"])] == r["value"]
    assigns = rows_of(rows, "assign", "asg-0")
    assert {(r["partition"], r["offset"]) for r in assigns} == {(0, 0), (1, 0), (2, 0)}
    assert rows_of(rows, "assign", "sub-0") and rows_of(rows, "commit_offsets", "sub-0")


def test_transactional_producer_copier_and_consumer(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    src, dst = f"tx-{uniq}", f"copy-{uniq}"
    config = {
        "topics": [{"name": src, "partitions": 3}, {"name": dst, "partitions": 2}],
        "users": [
            {
                "kind": "transactional_producer",
                "topics": [src],
                "count": 2,
                "records_per_txn": 4,
                "partitions_per_txn": 2,
                "abort_probability": 0.3,
                "flush_before_abort_probability": 0.5,
                "transaction_timeout_ms": 10000,
                "rate": 10,
                "op_timeout_s": 15,
            },
            {
                "kind": "eos_copier",
                "input_topics": [src],
                "output_topic": dst,
                "group_id": f"copiers-{uniq}",
                "abort_probability": 0.2,
                "transaction_timeout_ms": 10000,
                "op_timeout_s": 15,
            },
            {"kind": "read_committed_consumer", "topics": [src], "group_id": f"rc-{uniq}"},
        ],
    }
    run = tmp_path / "run"
    stats = run_workload(config, run, wl_bootstrap, 6, timeout_s=240, until=_transactional_ops_seen)
    assert {"txn/commit", "txn/send"} <= set(stats["by_name"]), stats

    result = final_read(wl_bootstrap, {src: 3, dst: 2}, run, timeout_s=60)
    assert result.complete, result.to_dict()
    rows = compacted(run)
    producer = [r for r in rows if r["process"].startswith("txn-producer")]
    outcome: dict[tuple[str, int], str] = {}
    for r in producer:
        if r["type"] in ("commit", "abort"):
            outcome[(r["process"], r["txn"])] = f"{r['type']}:{r['outcome']}"
    assert "commit:ok" in outcome.values() and "abort:ok" in outcome.values(), outcome
    sends = [r for r in producer if r["type"] == "send"]
    assert all(r["transactional_id"] == r["process"] for r in sends)
    assert all(r["offset"] is not None for r in sends if r["outcome"] == "ok")

    final_src = [r for r in rows_of(rows, "final_read") if r["topic"] == src and r["value"]]
    visible = defaultdict(set)
    for r in final_src:
        w, txn, i = decode_value(r["value"])
        visible[(w, txn)].add(i)
    for key, o in outcome.items():
        if o == "commit:ok":
            assert visible[key] == set(range(4)), (key, visible[key])
        elif o == "abort:ok":
            assert key not in visible, key

    # the copier: every copy names its source, and committed copies of a source appear once
    copies = [r for r in rows_of(rows, "final_read") if r["topic"] == dst and r["value"]]
    copier_sends = {r["value"]: r for r in rows_of(rows, "send", "copier")}
    assert copier_sends, "the copier copied nothing"
    sources = [copier_sends[r["value"]]["source"] for r in copies]
    assert all(s is not None for s in sources)
    assert len(sources) == len(set(sources)), "a source record was copied twice (EOS broken)"
    committed_src = {r["value"] for r in final_src}
    assert set(sources) <= committed_src
    assert rows_of(rows, "send_offsets", "copier")
    # every op of the copier's producer names its group: the analysis ties outputs to the
    # group whose offsets commit with them
    assert {r["group_id"] for r in copier_sends.values()} == {f"copiers-{uniq}"}


def _three_commits(run: Path) -> bool:
    return sum(r["type"] == "commit" for r in ops_so_far(run)) >= 3


def test_open_for_ms_keeps_each_transaction_open_after_its_records(
    wl_bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    """``open_for_ms``: a transaction ends no sooner than that long after its last record
    was acknowledged; its records stay in the log meanwhile, in an open transaction. The
    run's stop ends the wait, so the last transaction may end sooner."""
    topic = f"long-{uniq}"
    config = {
        "topics": [{"name": topic, "partitions": 2}],
        "users": [
            {
                "kind": "transactional_producer",
                "topics": [topic],
                "records_per_txn": 2,
                "partitions_per_txn": 2,
                "abort_probability": 0.0,
                "transaction_timeout_ms": 10000,
                "open_for_ms": 1500,
                "rate": 50,
                "op_timeout_s": 15,
            }
        ],
    }
    run = tmp_path / "run"
    run_workload(config, run, wl_bootstrap, 2, timeout_s=120, until=_three_commits)
    rows = compacted(run)
    acked: dict[int, int] = defaultdict(int)
    for r in rows_of(rows, "send", "txn-producer"):
        if r["outcome"] == "ok":
            acked[r["txn"]] = max(acked[r["txn"]], r["complete_ns"])
    commits = [r for r in rows_of(rows, "commit", "txn-producer") if r["outcome"] == "ok"]
    assert len(commits) >= 3, commits
    for c in sorted(commits, key=lambda r: r["txn"])[:-1]:
        held_ms = (c["invoke_ns"] - acked[c["txn"]]) / 1e6
        assert held_ms >= 1500, (c["txn"], held_ms)


def test_open_for_ms_is_refused_on_a_dual_writer() -> None:
    from pydantic import ValidationError

    from txnchaos.harness.workload.kinds.dual_writer import DualWriterSpec

    with pytest.raises(ValidationError, match="open_for_ms cannot be set on a dual_writer"):
        DualWriterSpec.model_validate({"kind": "dual_writer", "topics": ["t"], "open_for_ms": 100})
