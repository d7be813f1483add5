"""KIP-890 (transactions server-side defense), per transaction.version and per
transaction.partition.verification.enable: an old client's write without
AddPartitionsToTxn, a late write after its transaction ended, the new protocol's implicit
add (Produce v12) and epoch bump per transaction (EndTxn v5)."""

from __future__ import annotations

from collections.abc import Generator

from ..catalogue import Outcome, probe
from ..context import ProbeContext

EVERY_LEVEL = ("tv0", "tv0-noverify", "tv1", "tv1-noverify", "tv2", "tv2-noverify")
TV2 = ("tv2", "tv2-noverify")
OLD_PRODUCE = 9  # a client before KIP-890 (Produce v9, EndTxn v3, AddPartitionsToTxn v3)
OLD_END = 3


def _after(ctx: ProbeContext, topic: str, tid: str) -> Outcome:
    """What a partition and the coordinator show once nothing more happens."""
    return {
        "offsets": ctx.offsets(topic),
        "state": ctx.state(tid),
        "producers": ctx.producers(topic)["producers"],
    }


@probe("kip890.old-client-write-without-add", tags=("KIP-890",), configs=EVERY_LEVEL)
def write_without_add(ctx: ProbeContext) -> Outcome:
    """An old client writes to a partition it never added: verification refuses it
    (INVALID_TXN_STATE); without verification the write lands in a transaction the
    coordinator does not know, holding the LSO (a hanging transaction)."""
    topic, x = ctx.topic(), ctx.txn()
    produced = ctx.produce(x, topic, version=OLD_PRODUCE)
    return {"produce": produced, **_after(ctx, topic, str(x.tid))}


@probe("kip890.old-client-write-without-add-v11", tags=("KIP-890",), configs=EVERY_LEVEL)
def write_without_add_v11(ctx: ProbeContext) -> Outcome:
    """The same at Produce v11, the last version before the implicit add (Kafka answers a
    verification failure at v11 with an abortable error)."""
    topic, x = ctx.topic(), ctx.txn()
    produced = ctx.produce(x, topic, version=11)
    return {"produce": produced, **_after(ctx, topic, str(x.tid))}


@probe("kip890.old-client-commit", tags=("KIP-890",), configs=EVERY_LEVEL)
def old_client_commit(ctx: ProbeContext) -> Outcome:
    """The old protocol's transaction (add, produce, EndTxn v3): committed and visible."""
    topic, x = ctx.topic(), ctx.txn()
    added = ctx.add_partitions(x, {topic: [0]})
    produced = ctx.produce(x, topic, count=2, version=OLD_PRODUCE)
    ended = ctx.end(x, True, version=OLD_END)
    ctx.stable(topic)
    return {
        "add": added,
        "produce": produced,
        "end": ended,
        "fetch": ctx.fetch(topic),
        "describe": ctx.describe(str(x.tid)),
    }


@probe("kip890.old-client-late-write-after-abort", tags=("KIP-890",), configs=EVERY_LEVEL)
def late_write_after_abort(ctx: ProbeContext) -> Outcome:
    """KIP-890's first case: a write of an aborted transaction arrives after the abort's
    markers. Verification refuses it; without verification it opens a transaction nobody
    will end."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.add_partitions(x, {topic: [0]})
    first = ctx.produce(x, topic, version=OLD_PRODUCE)
    ended = ctx.end(x, False, version=OLD_END)
    ctx.stable(topic)
    late = ctx.produce(x, topic, version=OLD_PRODUCE)
    return {"first": first, "end": ended, "late": late, **_after(ctx, topic, str(x.tid))}


@probe("kip890.new-client-implicit-add", tags=("KIP-890",), configs=EVERY_LEVEL)
def implicit_add(ctx: ProbeContext) -> Outcome:
    """A TV2 client writes (Produce v12) without AddPartitionsToTxn and ends with EndTxn
    v5: at transaction.version 2 the broker adds the partition itself and the epoch is
    bumped at the end; below it, the cluster treats the client as an old one."""
    topic, x = ctx.topic(), ctx.txn()
    epoch = x.epoch
    produced = ctx.produce(x, topic, version=12)
    described = ctx.describe(str(x.tid))
    # Kafka 4.4 at TV0 answers CONCURRENT_TRANSACTIONS for good: a few seconds show it
    ended = ctx.end(x, True, version=5, patience=5.0)
    if ended == "NONE":
        ctx.stable(topic)
    return {
        "produce": produced,
        "during": described,
        "end": ended,
        "epoch_after_end": x.epoch - epoch,
        "fetch": ctx.fetch(topic),
    }


@probe("kip890.epoch-bump-per-transaction", tags=("KIP-890",), configs=TV2)
def epoch_per_transaction(ctx: ProbeContext) -> Outcome:
    """Three TV2 transactions (commit, abort, commit): each ends with a new epoch, which
    the markers carry and the next transaction uses, sequences starting at 0."""
    topic, x = ctx.topic(), ctx.txn()
    start = x.epoch
    steps = []
    for commit in (True, False, True):
        produced = ctx.produce(x, topic, version=12)
        ended = ctx.end(x, commit, version=5)
        ctx.stable(topic)  # the marker before the next transaction's record
        steps.append([produced["error"], ended, x.epoch - start])
    ctx.stable(topic)
    fetched = ctx.fetch(topic)
    for batch in fetched["batches"]:
        batch[3] -= start  # epochs relative to the first
    return {
        "steps": steps,
        "fetch": fetched,
        "describe_epoch": ctx.describe(str(x.tid))["epoch"] - start,
    }


@probe("kip890.late-write-old-epoch", tags=("KIP-890",), configs=TV2)
def late_write_old_epoch(ctx: ProbeContext) -> Outcome:
    """KIP-890's first and second cases for a TV2 client: a write with the epoch of an
    ended transaction is fenced, and the partition stays stable."""
    topic, x = ctx.topic(), ctx.txn()
    old = x.epoch
    ctx.produce(x, topic, version=12)
    ctx.end(x, False, version=5)
    ctx.stable(topic)
    late = ctx.produce(x, topic, version=12, epoch=old, sequence=1)
    return {"late": late, **_after(ctx, topic, str(x.tid))}


@probe("kip890.retried-end-old-epoch", tags=("KIP-890",), configs=TV2)
def retried_end(ctx: ProbeContext) -> Outcome:
    """An EndTxn v5 retried with the epoch from before the bump: the same result is the
    retry of a completed request (success, the bumped epoch again); the other result is
    refused."""
    topic, x = ctx.topic(), ctx.txn()
    old = x.epoch
    ctx.produce(x, topic, version=12)
    ctx.end(x, True, version=5)
    ctx.stable(topic)
    bumped = x.epoch
    x.epoch = old
    same = ctx.end(x, True, version=5, adopt=False)
    same_epoch = int(ctx.last_end.producer_epoch) - old
    other = ctx.end(x, False, version=5, adopt=False)
    x.epoch = bumped
    return {
        "same_result": same,
        "same_result_epoch": same_epoch,
        "other_result": other,
        "state": ctx.state(str(x.tid)),
    }


@probe("kip890.end-without-transaction", tags=("KIP-890",), configs=("tv2", "tv0"))
def end_without_transaction(ctx: ProbeContext) -> Outcome:
    """EndTxn for a producer with nothing in progress: commit and abort, old and new
    versions."""
    x = ctx.txn()
    out = {}
    for version in (3, 5):
        for commit in (True, False):
            out[f"v{version}-{'commit' if commit else 'abort'}"] = ctx.end(
                x, commit, version=version, adopt=False
            )
    out["state"] = ctx.wait_state(str(x.tid), "Empty", "CompleteAbort", "CompleteCommit")
    return out


#: how long a probe watches an answer that Kafka 4.4 never changes (the coordinator's
#: timeout scan runs every 0.5 s, the transaction times out after 1 s)
STUCK_S = 4.0


def _init_new_instance(ctx: ProbeContext, tid: str, base: int) -> Outcome:
    r = ctx.retry(
        lambda: ctx.init(tid, timeout_ms=1000, retry=False),
        lambda r: ctx.err(r.error_code),
        "InitProducerId",
        STUCK_S,
    )
    error = ctx.err(r.error_code)
    return {"error": error, "epoch": int(r.producer_epoch) - base if error == "NONE" else None}


@probe("kip890.tv2-produce-at-tv0-strands-the-id", tags=("KIP-890",), configs=("tv0",))
def tv2_produce_strands_id(ctx: ProbeContext) -> Generator[None, None, Outcome]:
    """A TV2 client's Produce v12 at transaction.version 0 is refused
    (UNSUPPORTED_VERSION); what the transactional id can do afterwards: abort (EndTxn v4),
    a new instance's InitProducerId, each retried for a few seconds, past the transaction
    timeout; and InitProducerId again after a restart. Kafka 4.4 leaves the id pending
    until its coordinator reloads (docs/findings/kafka-tv0-produce-v12-strands-the-id.md)."""
    topic = ctx.topic()
    x = ctx.txn(timeout_ms=1000)
    base = x.epoch
    produced = ctx.produce(x, topic, version=12)
    aborted = ctx.end(x, False, version=4, adopt=False, patience=STUCK_S)
    again = _init_new_instance(ctx, str(x.tid), base)
    yield
    return {
        "produce": produced["error"],
        "abort": aborted,
        "new_instance": again,
        "after_restart": _init_new_instance(ctx, str(x.tid), base),
    }
