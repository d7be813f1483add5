"""The transactions bench's worker for our own asyncio producer (``harness/clients``): the
same transactions as the librdkafka worker (``RECORDS_PER_TXN`` records spread over the
topic's partitions, one commit after another), run on the process's shared producer loop
(``LoopThread``), so that N producers are N tasks on one event loop, as the harness's
locust users run them."""

from __future__ import annotations

import os
import time

from txnchaos.harness.clients import Producer, ProducerConfig
from txnchaos.harness.clients.bridge import LoopThread


async def _transactions(
    bootstrap: str,
    txn_id: str,
    seconds: float,
    latencies: list[float],
    partitions: int,
    topic: str,
    records: int,
    record_bytes: int,
    transaction_version: int | None,
) -> int:
    producer = Producer(
        ProducerConfig(
            bootstrap,
            client_id=txn_id,
            transactional_id=txn_id,
            transaction_version=transaction_version,
            linger_ms=0,  # as the librdkafka worker's linger.ms
        )
    )
    await producer.init_transactions(30)
    payload = os.urandom(record_bytes // 2).hex().encode()
    done = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            await producer.begin_transaction()
            for i in range(records):
                producer.send(topic, (done + i) % partitions, payload)
            started = time.perf_counter()
            await producer.commit_transaction(30)
            latencies.append(time.perf_counter() - started)
            done += 1
    finally:
        await producer.close()
    return done


def run_ours(
    bootstrap: str,
    txn_id: str,
    seconds: float,
    latencies: list[float],
    partitions: int,
    *,
    topic: str,
    records: int,
    record_bytes: int,
    transaction_version: int | None,
) -> int:
    """Commit transactions with our producer until ``seconds`` pass; returns how many. Blocks
    the calling thread while the shared loop runs it (``transaction_version`` None follows the
    cluster's finalized level)."""
    coro = _transactions(
        bootstrap,
        txn_id,
        seconds,
        latencies,
        partitions,
        topic,
        records,
        record_bytes,
        transaction_version,
    )
    return LoopThread.shared().run(coro, seconds + 120)
