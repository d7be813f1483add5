"""A kill -9 storm with a full disk in the middle: no acknowledged commit is lost.

Issue 35's "done when". A local cluster (two brokers, one coordinator) whose broker 1 keeps
its data on a small tmpfs; transactional producers (librdkafka, random aborts, some
flushed before aborting) commit transactions over four partitions while this script
SIGKILLs and restarts a random node every ``--interval`` seconds. At ``--fill-at`` (a
fraction of the run) broker 1's disk is filled to the last page: its log directory goes
offline (KAFKA_STORAGE_ERROR) and stays so for ``--full-seconds``; then the filler is
deleted and broker 1 restarted, and the storm goes on. At the end, once no transaction is
open, a read_committed reader reads every partition from the start, and:

* every record of every transaction whose commit returned is there exactly once (lost,
  duplicated: both 0);
* no record of an aborted transaction is visible;
* a transaction whose outcome the client could not learn is all or nothing.

Prints the numbers and exits 0 when all hold, 1 otherwise, 2 if the tmpfs cannot be
mounted (root only). Run: ``.venv/bin/python bench/kill_storm.py [--seconds 300]``;
``tests/integration/hardening/test_kill_storm.py`` runs a short storm.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from txnchaos.harness.launch.local import LocalCluster, node_dir

PARTITIONS = 4
COORDINATOR = 1001
FULL_DISK = 1  # the broker whose data directory is the small tmpfs
SETTINGS = [
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
    "log.segment.bytes=1048576",
]


@dataclass
class Txn:
    values: list[bytes]
    outcome: str = "open"  # committed / aborted / unknown


@dataclass
class Worker:
    index: int
    txn_id: str
    txns: list[Txn] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    counter: int = 0


#: longest a full disk waits for a write to meet it after ``--full-seconds``
FULL_UNTIL_OFFLINE_S = 30.0


def log_dir_offline(node_dir: Path) -> bool:
    """Whether the node's log says its log directory went offline (a write met the full
    disk)."""
    log = node_dir / "node.log"
    return log.exists() and "offline" in log.read_text(errors="replace").lower()


def producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 30_000,
            "message.timeout.ms": 30_000,
            "linger.ms": 5,
            "reconnect.backoff.max.ms": 200,
            "log_level": 0,
        }
    )
    p.init_transactions(120)
    return p


def run_worker(bootstrap: str, topic: str, w: Worker, stop_at: float, seed: int) -> None:
    rng = random.Random(seed)
    p = producer(bootstrap, w.txn_id)
    while time.monotonic() < stop_at:
        txn = Txn([])
        w.txns.append(txn)
        try:
            p.begin_transaction()
            for _ in range(rng.randint(1, 20)):
                partition = rng.randrange(PARTITIONS)
                value = f"p{w.index}-{w.counter}-{partition}".encode()
                w.counter += 1
                txn.values.append(value)
                p.produce(topic, value, partition=partition)
                p.poll(0)
            if rng.random() < 0.75:
                p.commit_transaction(120)
                txn.outcome = "committed"
            else:
                if rng.random() < 0.5:
                    p.flush(120)  # so aborted records reach the log
                p.abort_transaction(120)
                txn.outcome = "aborted"
        except KafkaException as exc:
            err = exc.args[0]
            w.errors.append(err.name())
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(120)
                    txn.outcome = "aborted"
                except KafkaException as again:
                    w.errors.append(again.args[0].name())
                    txn.outcome = "unknown"
                    p = producer(bootstrap, w.txn_id)
            else:
                # retriable after its timeout, or fatal: the outcome is unknown to us; a new
                # instance fences the old one (and aborts its transaction if still open)
                txn.outcome = "unknown"
                p = producer(bootstrap, w.txn_id)
    p.flush(60)


def mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0


def fill(disk: Path) -> Path:
    """Take every free page of ``disk`` with a filler file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                if os.write(fd, chunk) < len(chunk):
                    break
            except OSError:
                break
        small = b"\0" * 512  # the last partial pages
        while True:
            try:
                if os.write(fd, small) < len(small):
                    break
            except OSError:
                break
    finally:
        os.close(fd)
    return filler


def watermarks(bootstrap: str, topic: str, isolation: str) -> list[int]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "storm-offsets", "isolation.level": isolation}
    )
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        c.close()


def wait_stable(bootstrap: str, topic: str, timeout: float = 180) -> None:
    """Until no transaction is open (LSO = high watermark on every partition)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if watermarks(bootstrap, topic, "read_committed") == watermarks(
                bootstrap, topic, "read_uncommitted"
            ):
                return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} did not become stable within {timeout:.0f} s")
        time.sleep(0.5)


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    ends = watermarks(bootstrap, topic, "read_committed")
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "storm-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: list[bytes] = []
    done: set[int] = {p for p in range(PARTITIONS) if ends[p] == 0}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 300
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for msg in c.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                partition, offset = msg.partition() or 0, msg.offset() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and offset >= ends[partition]:
                        done.add(partition)
                    continue
                out.append(msg.value() or b"")
    finally:
        c.close()
    if len(done) < PARTITIONS:
        raise RuntimeError("the reader did not reach the end of every partition")
    return out


@dataclass
class Verdict:
    committed_txns: int
    committed_records: int
    aborted_txns: int
    unknown_txns: int
    lost: int
    duplicated: int
    aborted_visible: int
    partial: int

    @property
    def ok(self) -> bool:
        return (
            self.committed_txns > 0
            and self.lost == self.duplicated == self.aborted_visible == self.partial == 0
        )


def judge(read: list[bytes], workers: list[Worker]) -> Verdict:
    counts = Counter(read)
    seen = set(read)
    txns = [t for w in workers for t in w.txns]
    committed = [t for t in txns if t.outcome == "committed"]
    aborted = [t for t in txns if t.outcome == "aborted"]
    unknown = [t for t in txns if t.outcome == "unknown"]
    committed_values = {v for t in committed for v in t.values}
    aborted_values = {v for t in aborted for v in t.values}
    return Verdict(
        committed_txns=len(committed),
        committed_records=len(committed_values),
        aborted_txns=len(aborted),
        unknown_txns=len(unknown),
        lost=len(committed_values - seen),
        duplicated=sum(n - 1 for n in counts.values() if n > 1),
        aborted_visible=len(aborted_values & seen),
        partial=sum(1 for t in unknown if 0 < len(set(t.values) & seen) < len(t.values)),
    )


def storm(args: argparse.Namespace, root: Path) -> int:
    rng = random.Random(args.seed)
    cluster = LocalCluster.prepare(root / "cluster", 2, 1, SETTINGS)
    disk = node_dir(cluster.data_dir, FULL_DISK)
    if not mount_tmpfs(disk, args.disk_size):
        print(f"cannot mount a tmpfs at {disk} (needs root)", file=sys.stderr)
        return 2
    cluster.die_with_harness = True
    kills = 0
    storage_errors = 0
    try:
        cluster.up()
        bootstrap = cluster.state()["bootstrap"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = "storm"
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            f.result(60)
        workers = [Worker(i, f"storm-tx{i}") for i in range(args.producers)]
        started = time.monotonic()
        stop_at = started + args.seconds
        threads = [
            threading.Thread(target=run_worker, args=(bootstrap, topic, w, stop_at, args.seed + i))
            for i, w in enumerate(workers)
        ]
        for t in threads:
            t.start()
        filled = False
        nodes = [1, 2, COORDINATOR]
        while time.monotonic() < stop_at - args.interval:
            time.sleep(args.interval)
            if not filled and time.monotonic() - started >= args.fill_at * args.seconds:
                filled = True
                filler = fill(disk)
                print(f"t={time.monotonic() - started:.0f}s: broker {FULL_DISK}'s disk is full")
                time.sleep(args.full_seconds)
                # kept full until a write met it (the log dir goes offline), within a bound: on
                # a loaded machine the producers may write nothing to it for a few seconds
                until = time.monotonic() + FULL_UNTIL_OFFLINE_S
                while not log_dir_offline(disk) and time.monotonic() < until:
                    time.sleep(0.2)
                filler.unlink()
                cluster.kill_node(FULL_DISK)
                cluster.restart_node(FULL_DISK)
                kills += 1
                print(f"t={time.monotonic() - started:.0f}s: room again, broker restarted")
                continue
            victim = rng.choice(nodes)
            cluster.kill_node(victim)
            cluster.restart_node(victim)
            kills += 1
        for t in threads:
            t.join(600)
            if t.is_alive():
                print("a producer thread hung", file=sys.stderr)
                return 1
        wait_stable(bootstrap, topic)
        read = read_committed(bootstrap, topic)
        verdict = judge(read, workers)
        errors = Counter(e for w in workers for e in w.errors)
        storage_errors = errors.get("KAFKA_STORAGE_ERROR", 0)
        offline = log_dir_offline(disk)
        print(
            f"{args.seconds:.0f} s, {args.producers} producers: {verdict.committed_txns} "
            f"acked commits ({verdict.committed_records} records), {verdict.aborted_txns} "
            f"aborted, {verdict.unknown_txns} unknown outcome; {kills} kills (kill -9), disk "
            f"full {args.full_seconds:.0f} s (log dir offline: {'yes' if offline else 'no'}, "
            f"{storage_errors} KAFKA_STORAGE_ERROR at the clients)"
        )
        print(
            f"lost {verdict.lost}, duplicated {verdict.duplicated}, aborted visible "
            f"{verdict.aborted_visible}, partial unknown {verdict.partial}; client errors "
            f"{dict(errors.most_common(6))}"
        )
        return 0 if verdict.ok else 1
    finally:
        cluster.down()
        subprocess.run(["umount", "-l", str(disk)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between kills")
    parser.add_argument("--fill-at", type=float, default=0.4, help="fraction of the run")
    parser.add_argument("--full-seconds", type=float, default=5.0)
    parser.add_argument("--disk-size", default="64m")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="txnchaos-storm-"))
    try:
        return storm(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
