"""The transactions bench's worker for the official Java client (kafka-clients in a JVM of its
own, driven over the line protocol of ``harness/workload/java_client``): the same transactions
as the librdkafka worker (``records`` records spread over the topic's partitions, one commit
after another). Each producer is its own JVM, as each Java workload user is; the JVM's start,
the producer's creation and its init are done before the clock starts.

The Python side costs two round trips per transaction over a pipe (begin, commit; the sends are
not answered, their acks arrive as lines), tens of microseconds each: small beside a commit."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from txnchaos.harness.workload.java_client.process import JavaCallError, JavaProcess
from txnchaos.harness.workload.java_client.versions import DEFAULT_VERSION


def run_java(
    bootstrap: str,
    txn_id: str,
    seconds: float,
    latencies: list[float],
    partitions: int,
    *,
    topic: str,
    records: int,
    record_bytes: int,
    version: str = DEFAULT_VERSION,
    ready: Callable[[], None] | None = None,
) -> int:
    """Commit transactions with a Java producer (kafka-clients ``version``) until ``seconds``
    pass; returns how many. It speaks the cluster's finalized transaction.version (TV2 where
    finalised, as the Java client chooses). ``ready``, if given, is called once the producer
    is initialised, before the clock starts (a barrier lets many JVMs start their clocks
    together)."""
    failed: list[dict[str, Any]] = []
    java = JavaProcess(txn_id, version, None)
    java.on_ack = lambda msg: failed.append(msg) if "error" in msg else None
    java.start(120)
    payload = os.urandom(record_bytes // 2).hex()
    done = 0
    try:
        props = [
            f"bootstrap.servers={bootstrap}",
            f"client.id={txn_id}",
            f"transactional.id={txn_id}",
            "linger.ms=0",  # as the librdkafka worker's
            "acks=all",
        ]
        java.request("producer", *props, timeout_s=120)
        java.request("init", False, timeout_s=120)
        if ready is not None:
            ready()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            java.request("begin", timeout_s=60)
            for i in range(records):
                java.post("send", topic, (done + i) % partitions, None, payload, 0)
            started = time.perf_counter()
            java.request("commit", timeout_s=120)  # commitTransaction flushes first
            latencies.append(time.perf_counter() - started)
            if failed:
                raise RuntimeError(f"{txn_id}: a record failed: {failed[0]}")
            done += 1
        java.request("close_producer", 5000, timeout_s=60)
    except JavaCallError as e:
        raise RuntimeError(f"{txn_id}: {e}") from e
    finally:
        java.stop()
    return done
