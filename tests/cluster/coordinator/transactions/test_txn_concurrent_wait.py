"""Requests for a transaction whose markers are in flight wait for them (bounded)
instead of failing at once with CONCURRENT_TRANSACTIONS; 0 keeps Kafka's behaviour."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.cluster.coordinator.transactions.txn_support import (
    CONCURRENT_TRANSACTIONS,
    NONE,
    Harness,
    async_test,
)


async def _committed_but_markers_pending(h: Harness) -> tuple[int, int]:
    err, pid, epoch = await h.init()
    assert err == NONE
    assert set((await h.add(pid, epoch, {"t1": [0]})).values()) == {NONE}
    assert await h.end(pid, epoch, commit=True) == NONE  # PrepareCommit; markers queued
    return pid, epoch


@async_test
async def test_zero_wait_answers_concurrent_transactions_at_once(tmp_path: Path) -> None:
    h = Harness(tmp_path, concurrent_wait_ms=0).start()
    pid, epoch = await _committed_but_markers_pending(h)
    assert set((await h.add(pid, epoch, {"t1": [1]})).values()) == {CONCURRENT_TRANSACTIONS}


@async_test
async def test_next_transaction_waits_for_the_markers(tmp_path: Path) -> None:
    h = Harness(tmp_path, concurrent_wait_ms=10_000).start()
    pid, epoch = await _committed_but_markers_pending(h)
    add = asyncio.create_task(h.add(pid, epoch, {"t1": [1]}))
    await asyncio.sleep(0)  # the request is now parked on the completing transaction
    assert not add.done()
    await h.flush()  # the markers are acknowledged: CompleteCommit is written
    assert set((await add).values()) == {NONE}
    assert h.state() == "Ongoing"


@async_test
async def test_wait_is_bounded_when_markers_cannot_be_delivered(tmp_path: Path) -> None:
    h = Harness(tmp_path, concurrent_wait_ms=50).start()
    pid, epoch = await _committed_but_markers_pending(h)
    assert set((await h.add(pid, epoch, {"t1": [1]})).values()) == {CONCURRENT_TRANSACTIONS}
