"""Which Apache Kafka releases the kafka launcher runs on this machine's Java: for each release,
the launcher's usual cluster (2 brokers and 1 KRaft controller, or 2 brokers and the
launcher's ZooKeeper before 3.3; a proxy on every link), then transactions through the
proxies with librdkafka (committed and aborted ones) read back with read_committed, then
the cluster stopped. A release refused before start (the launcher's ``java_problem``) is
reported with its reason.

The table of docs/apache-kafka.md ("Releases") comes from this script.

Run: .venv/bin/python bench/kafka_releases.py [--versions 4.4.0,3.9.1,2.8.2]
     [--transactions 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from txnchaos.harness.launch.base import ClusterSpec
from txnchaos.harness.launch.kafka.launcher import KafkaLauncher
from txnchaos.harness.launch.kafka.release import (
    KafkaRelease,
    java_binary,
    java_major,
    java_problem,
)

WAIT_S = 120.0


def transactions(bootstrap: str, count: int) -> tuple[int, int]:
    """``count`` committed transactions of 2 records and one aborted; returns (records
    read back with read_committed, records expected)."""
    topic = f"releases-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(WAIT_S)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(WAIT_S)
    for i in range(count):
        p.begin_transaction()
        p.produce(topic, f"c{i}-0".encode(), partition=0)
        p.produce(topic, f"c{i}-1".encode(), partition=1)
        p.commit_transaction(WAIT_S)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.flush(WAIT_S)
    p.abort_transaction(WAIT_S)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 2 * count and time.monotonic() < deadline:
            for m in c.consume(100, 1.0):
                if m.error() is None:
                    got.append(m.value())
        got += [m.value() for m in c.consume(100, 2.0) if m.error() is None]
    finally:
        c.close()
    if b"aborted" in got:
        raise RuntimeError("read_committed returned the aborted record")
    return len(got), 2 * count


def check(version: str, count: int, out: Path) -> dict[str, Any]:
    release = KafkaRelease.parse(version)
    major = java_major(java_binary())
    row: dict[str, Any] = {"version": version, "java": major, "mode": None}
    problem = java_problem(release, major)
    if problem is not None:
        return {**row, "result": "refused", "detail": problem}
    run_dir = out / version
    shutil.rmtree(run_dir, ignore_errors=True)
    started = time.monotonic()
    handle = None
    try:
        handle = KafkaLauncher(version).start(
            ClusterSpec(brokers=2, coordinators=1 if release.kraft else 0, proxied=True), run_dir
        )
        row["mode"] = handle.describe().get("mode")
        row["start_s"] = round(time.monotonic() - started, 1)
        got, want = transactions(handle.bootstrap, count)
        ok = got == want
        return {
            **row,
            "result": "runs" if ok else "wrong",
            "detail": f"{count} committed + 1 aborted transaction: read_committed {got}/{want}",
        }
    except Exception as exc:  # reported per release (LaunchError, client errors)
        return {**row, "result": "fails", "detail": f"{type(exc).__name__}: {exc}"[:400]}
    finally:
        if handle is not None:
            handle.stop()


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--versions", default="4.4.0,4.0.0,3.9.1,3.7.1,3.5.2,2.8.2,2.4.0,2.3.1")
    ap.add_argument("--transactions", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here (default: temp)")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="txnchaos-kafka-releases-"))
    rows = []
    for v in [x.strip() for x in args.versions.split(",") if x.strip()]:
        row = check(v, args.transactions, out)
        row["load"] = round(os.getloadavg()[0], 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| release | mode | Java | result | start | detail |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        start = f"{r['start_s']:.0f} s (load {r['load']})" if "start_s" in r else "—"
        print(
            f"| {r['version']} | {r['mode'] or '—'} | {r['java']} | {r['result']} | {start} "
            f"| {r['detail']} |"
        )
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if all(r["result"] in ("runs", "refused") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
