"""The last stable offset and the aborted-transaction index: what a read_committed fetch
returns, across segments, restarts and retention."""

from __future__ import annotations

import time
from collections.abc import Generator

from ..catalogue import Outcome, probe
from ..context import READ_UNCOMMITTED, ProbeContext

#: the timeout of a transaction open across a restart: a loaded machine can take a JVM
#: more than the usual 60 s to restart, and a timed-out transaction is aborted
RESTART_PROOF_MS = 600_000


@probe("lso.open-transaction-holds-lso", tags=("LSO",), configs=("tv2",))
def open_holds(ctx: ProbeContext) -> Outcome:
    """An open transaction holds the LSO at its first offset; read_committed stops there."""
    topic, x = ctx.topic(), ctx.txn()
    y = ctx.txn()
    ctx.transaction(y, topic, True, count=2)
    ctx.produce(x, topic, count=3, version=12)
    return {
        "offsets": ctx.offsets(topic),
        "read_committed": ctx.fetch(topic),
        "read_uncommitted": ctx.fetch(topic, isolation=READ_UNCOMMITTED),
    }


@probe("lso.aborted-transactions-in-fetch", tags=("LSO",), configs=("tv2",))
def aborted_in_fetch(ctx: ProbeContext) -> Outcome:
    """read_committed returns the aborted transactions overlapping the fetch."""
    topic, x = ctx.topic(), ctx.txn()
    for commit in (True, False, False, True):
        ctx.transaction(x, topic, commit, count=2)
    return {
        "from_0": ctx.fetch(topic),
        "from_4": ctx.fetch(topic, offset=4),
        "uncommitted": ctx.fetch(topic, isolation=READ_UNCOMMITTED)["aborted"],
    }


@probe("lso.aborted-index-after-restart", tags=("LSO",), configs=("tv2",))
def aborted_after_restart(ctx: ProbeContext) -> Generator[None, None, Outcome]:
    """The aborted-transaction index and LSO survive a restart (and an open transaction
    still holds the LSO after it)."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.transaction(x, topic, False, count=2)
    y = ctx.txn(timeout_ms=RESTART_PROOF_MS)
    ctx.produce(y, topic, version=12)
    before = ctx.fetch(topic)
    yield
    return {"before": before, "after": ctx.fetch(topic), "offsets": ctx.offsets(topic)}


SEGMENTS = {"segment.bytes": "1048576"}  # Kafka's smallest segment
BIG = 300_000  # four batches of this size fill a segment


def _segmented(ctx: ProbeContext) -> str:
    """A partition of several segments: commit, abort, commit, abort, commit, each a
    transaction of one 300 kB record (a segment holds three)."""
    topic, x = ctx.topic(configs=SEGMENTS), ctx.txn()
    for commit in (True, False, True, False, True, True, False):
        ctx.transaction(x, topic, commit, value_size=BIG)
    ctx.stable(topic)
    return topic


def _read(ctx: ProbeContext, topic: str, start: int = 0) -> Outcome:
    """read_committed from every other offset: the aborted transactions each fetch
    returns and the first batch it starts with."""
    end = ctx.offsets(topic)["high_watermark"]
    out = {}
    for offset in range(start, end, 2):
        f = ctx.fetch(topic, offset=offset)
        out[str(offset)] = {"aborted": f["aborted"], "first": f["batches"][:1]}
    return out


@probe("lso.aborted-index-across-segments", tags=("LSO",), configs=("tv2", "tv0"))
def across_segments(ctx: ProbeContext) -> Outcome:
    """Aborted transactions spread over several segments: each read_committed fetch
    returns those overlapping what it reads, from whichever segment's index."""
    topic = _segmented(ctx)
    return {"offsets": ctx.offsets(topic), "reads": _read(ctx, topic)}


@probe("lso.aborted-index-across-segments-after-restart", tags=("LSO",), configs=("tv2",))
def across_segments_restart(ctx: ProbeContext) -> Generator[None, None, Outcome]:
    """The same after a restart (the segments' aborted-transaction indexes are read back
    or rebuilt)."""
    topic = _segmented(ctx)
    yield
    return {"offsets": ctx.offsets(topic), "reads": _read(ctx, topic)}


@probe("lso.delete-records-past-aborted", tags=("LSO",), configs=("tv2",))
def delete_past_aborted(ctx: ProbeContext) -> Outcome:
    """DeleteRecords moves the log start offset into and past aborted transactions: what
    read_committed returns from the new start."""
    topic, x = ctx.topic(), ctx.txn()
    for commit in (False, True, False, True):
        ctx.transaction(x, topic, commit, count=2)
    out = {}
    for offset in (1, 3, 7):
        out[str(offset)] = {
            "delete": ctx.delete_records(topic, 0, offset),
            "fetch": ctx.fetch(topic, offset=offset),
        }
    return out


@probe("lso.interleaved-producers", tags=("LSO",), configs=("tv2", "tv0"))
def interleaved(ctx: ProbeContext) -> Outcome:
    """Two producers interleave: the first's open transaction holds the LSO below the
    second's committed one; after the first aborts, read_committed returns the second's
    records and the first as aborted."""
    topic, a, b = ctx.topic(), ctx.txn(), ctx.txn()
    ctx.add_partitions(a, {topic: [0]})
    ctx.add_partitions(b, {topic: [0]})
    ctx.produce(a, topic, version=9)
    ctx.produce(b, topic, count=2, version=9)
    ctx.produce(a, topic, version=9)
    ctx.end(b, True, version=3)
    ctx.wait_state(str(b.tid), "CompleteCommit")
    held = {"offsets": ctx.offsets(topic), "fetch": ctx.fetch(topic)}
    ctx.end(a, False, version=3)
    ctx.stable(topic)
    return {"held": held, "after": ctx.fetch(topic)}


@probe("lso.read-uncommitted-past-lso", tags=("LSO",), configs=("tv2",))
def uncommitted_past_lso(ctx: ProbeContext) -> Outcome:
    """read_uncommitted returns records past the LSO, with no aborted-transaction list."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.produce(x, topic, count=3, version=12)
    return {
        "uncommitted": ctx.fetch(topic, isolation=READ_UNCOMMITTED),
        "committed": ctx.fetch(topic),
    }


@probe("lso.transaction-log-after-restart", tags=("LSO", "KIP-664"), configs=("tv2", "tv0"))
def txn_log_after_restart(ctx: ProbeContext) -> Generator[None, None, Outcome]:
    """The transaction log's state after a restart: an open, an empty, a committed and an
    aborted transactional id are described as before, and the open one still holds the
    LSO until it is ended."""
    topic, empty, done, aborted = ctx.topic(), ctx.txn(), ctx.txn(), ctx.txn()
    ongoing = ctx.txn(timeout_ms=RESTART_PROOF_MS)
    for x, commit in ((done, True), (aborted, False)):
        ctx.add_partitions(x, {topic: [0]})
        ctx.produce(x, topic, version=9)
        ctx.end(x, commit, version=3)
        ctx.stable(topic)  # its marker before the next transaction's record
    ctx.add_partitions(ongoing, {topic: [0]})
    ctx.produce(ongoing, topic, version=9)
    names = {"ongoing": ongoing, "empty": empty, "committed": done, "aborted": aborted}
    before = {k: ctx.describe(str(x.tid)) for k, x in names.items()}
    yield
    after = {k: ctx.describe(str(x.tid)) for k, x in names.items()}
    offsets = ctx.offsets(topic)
    ended = ctx.end(ongoing, True, version=3)
    ctx.stable(topic)
    return {
        "same_as_before": before == after,
        "after": after,
        "offsets": offsets,
        "end": ended,
        "fetch": ctx.fetch(topic),
    }


@probe("lso.retention-deletes-segments", tags=("LSO",), configs=("tv2-retention",))
def retention(ctx: ProbeContext) -> Outcome:
    """Retention (retention.bytes) deletes the oldest segments of a partition of aborted
    and committed transactions: the new log start offset, and what read_committed returns
    from there (the aborted transactions of the segments left)."""
    topic, x = ctx.topic(configs={**SEGMENTS, "retention.bytes": "1048576"}), ctx.txn()
    for commit in (True, False, True, False, True, True, False):
        ctx.transaction(x, topic, commit, value_size=BIG)
    start = ctx.wait(lambda: ctx.fetch(topic, offset=14)["log_start"], "retention to run")
    time.sleep(1.0)  # three more retention passes: nothing else is due
    start = ctx.fetch(topic, offset=14)["log_start"]
    return {"log_start": start, "offsets": ctx.offsets(topic), "reads": _read(ctx, topic, start)}
