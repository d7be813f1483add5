"""Shared helpers for the confluent-kafka transaction suites (``test_txn_clients_*``).

Everything here talks to real node processes through real clients; waits are bounded
polls with generous limits, never a sleep that hopes something has happened.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import start_cluster
from txnchaos.harness.launch.local import LocalCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
COORDINATOR_ID = 1001
WAIT_S = 60.0

# A short abort-task period so that timed-out transactions are aborted promptly.
TXN_SETTINGS = [
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
]


def txn_cluster(
    root: Path, brokers: int = 2, coordinators: int = 1, extra_settings: Iterable[str] = ()
) -> LocalCluster:
    settings = [*TXN_SETTINGS, *extra_settings]
    return start_cluster(root, brokers=brokers, coordinators=coordinators, settings=settings)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


# ---------------------------------------------------------------------- topics


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    wait_until(
        lambda: (
            len(leaders(bootstrap, name)) == partitions
            and all(v >= 0 for v in leaders(bootstrap, name).values())
        ),
        f"leaders of {name}",
    )


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader node id, from cluster metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p.id: p.leader for p in t.partitions.values()}


def partition_on(bootstrap: str, topic: str, broker: int) -> int:
    return next(p for p, leader in sorted(leaders(bootstrap, topic).items()) if leader == broker)


# ---------------------------------------------------------------------- clients


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": 60_000,
        "linger.ms": 5,
    }
    conf.update(extra)
    conf.setdefault("message.timeout.ms", conf["transaction.timeout.ms"])
    return Producer(conf)


def consumer(bootstrap: str, isolation: str, **extra: Any) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("reader"),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "fetch.wait.max.ms": 100,
    }
    conf.update(extra)
    return Consumer(conf)


def assign_all(c: Consumer, topic: str, partitions: Iterable[int]) -> None:
    c.assign([TopicPartition(topic, p, 0) for p in partitions])


def drain(c: Consumer, timeout: float = 2.0) -> list[Any]:
    """Everything ``c`` returns until it has been quiet for ``timeout`` seconds."""
    out: list[Any] = []
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < timeout:
        batch = c.consume(num_messages=1000, timeout=0.2)
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(err)
            out.append(msg)
        if batch:
            quiet_since = time.monotonic()
    return out


def read_values(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    isolation: str = "read_committed",
    until: Callable[[list[bytes]], bool] | None = None,
    timeout: float = WAIT_S,
    settle: float = 2.0,
) -> list[bytes]:
    """Read ``topic`` from the beginning with a fresh consumer. Stops once ``until``
    holds for what was read and nothing more arrives for ``settle`` seconds, or, without
    ``until``, once every partition reached its end (the LSO for read_committed)."""
    parts = list(partitions)
    c = consumer(bootstrap, isolation, **{"enable.partition.eof": True})
    try:
        assign_all(c, topic, parts)
        values: list[bytes] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while True:
            batch = c.consume(num_messages=1000, timeout=0.2)
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof.add(msg.partition())
                        continue
                    raise KafkaException(err)
                at_eof.discard(msg.partition())
                values.append(msg.value())
                quiet_since = time.monotonic()
            done = until(values) if until is not None else at_eof >= set(parts)
            if done and time.monotonic() - quiet_since >= settle:
                return values
            if time.monotonic() > deadline:
                if until is None:
                    raise AssertionError(
                        f"{topic}: partitions {sorted(set(parts) - at_eof)} never reached "
                        f"their end within {timeout:.0f}s ({len(values)} values read)"
                    )
                return values
    finally:
        c.close()


def committed_values(
    bootstrap: str, topic: str, partitions: Iterable[int], **kwargs: Any
) -> list[bytes]:
    return read_values(bootstrap, topic, partitions, "read_committed", **kwargs)


def uncommitted_values(
    bootstrap: str, topic: str, partitions: Iterable[int], **kwargs: Any
) -> list[bytes]:
    return read_values(bootstrap, topic, partitions, "read_uncommitted", **kwargs)


def offsets(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple[int, int]:
    """(low, high) watermark as seen by a consumer with this isolation (high = LSO for
    read_committed)."""
    c = consumer(bootstrap, isolation)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
    finally:
        c.close()


def wait_stable(bootstrap: str, topic: str, partitions: Iterable[int], timeout: float = 90) -> None:
    """Wait until no transaction is open on these partitions (LSO == high watermark)."""
    for p in partitions:
        wait_until(
            lambda p=p: (
                offsets(bootstrap, topic, p, "read_committed")[1]
                == offsets(bootstrap, topic, p, "read_uncommitted")[1]
            ),
            f"{topic}-{p} to become stable (LSO = high watermark)",
            timeout,
        )


# ---------------------------------------------------------------------- subprocesses


class Helper:
    """``tests/integration/txn_clients_procs.py`` in its own process, so that it can be
    killed with SIGKILL without touching the test process. Its stdout lines are
    collected by a thread; ``wait_for_line`` waits for one with bounded patience."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(Path(__file__).with_name("txn_clients_procs.py")), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO_ROOT,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for_line(self, prefix: str, timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith(prefix):
                return line
        raise AssertionError(
            f"helper never printed {prefix!r} (rc={self.proc.poll()}); output:\n"
            + "".join(self.output[-40:])
        )

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        if self.proc.stdin is not None:
            self.proc.stdin.close()

    def wait(self, timeout: float = WAIT_S) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return rc

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill9()
