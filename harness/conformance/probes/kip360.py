"""KIP-360: InitProducerId with the producer's current id and epoch (a safe epoch bump),
fencing of wrong ids and epochs, and the idempotent producer's unknown-producer cases."""

from __future__ import annotations

from ..catalogue import Outcome, probe
from ..context import ProbeContext

LEVELS = ("tv0", "tv2")


def _init(ctx: ProbeContext, tid: str | None, pid: int, epoch: int, base: int) -> Outcome:
    r = ctx.init(tid, producer_id=pid, epoch=epoch)
    return {
        "error": ctx.err(r.error_code),
        "producer": ctx.p(r.producer_id),
        "epoch": int(r.producer_epoch) - base if int(r.producer_epoch) >= 0 else -1,
    }


@probe("kip360.init-with-current-epoch", tags=("KIP-360",), configs=LEVELS)
def init_with_current(ctx: ProbeContext) -> Outcome:
    """InitProducerId with the current id and epoch keeps the id and bumps the epoch."""
    x = ctx.txn()
    return {
        "first": ctx.p(x.producer_id),
        "again": _init(ctx, x.tid, x.producer_id, x.epoch, x.epoch),
        "state": ctx.describe(str(x.tid)),
    }


@probe("kip360.init-with-stale-epoch", tags=("KIP-360",), configs=LEVELS)
def init_with_stale(ctx: ProbeContext) -> Outcome:
    """InitProducerId with an epoch below the current one (a zombie's) is fenced."""
    x = ctx.txn()
    ctx.init(x.tid, producer_id=x.producer_id, epoch=x.epoch)  # now x.epoch + 1
    return {"zombie": _init(ctx, x.tid, x.producer_id, x.epoch - 1 if x.epoch else 0, x.epoch)}


@probe("kip360.init-with-future-epoch", tags=("KIP-360",), configs=LEVELS)
def init_with_future(ctx: ProbeContext) -> Outcome:
    """InitProducerId with an epoch above the current one."""
    x = ctx.txn()
    return {"future": _init(ctx, x.tid, x.producer_id, x.epoch + 5, x.epoch)}


@probe("kip360.init-with-other-producer-id", tags=("KIP-360",), configs=LEVELS)
def init_with_other_id(ctx: ProbeContext) -> Outcome:
    """InitProducerId naming an id the transactional id does not have:
    INVALID_PRODUCER_ID_MAPPING (the producer must start over with -1/-1)."""
    x = ctx.txn()
    y = ctx.txn()
    wrong = _init(ctx, x.tid, y.producer_id, y.epoch, x.epoch)
    fresh = _init(ctx, x.tid, -1, -1, x.epoch)
    return {"wrong": wrong, "fresh": fresh}


@probe("kip360.init-bump-aborts-open-transaction", tags=("KIP-360",), configs=LEVELS)
def init_aborts_open(ctx: ProbeContext) -> Outcome:
    """InitProducerId with the current id/epoch while a transaction is open aborts it
    (markers at the bumped epoch) and returns a new epoch."""
    topic, x = ctx.topic(), ctx.txn()
    base = x.epoch
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, version=9)
    again = _init(ctx, x.tid, x.producer_id, x.epoch, base)
    ctx.stable(topic)
    fetched = ctx.fetch(topic, isolation=0)
    for batch in fetched["batches"]:
        batch[3] -= base
    return {"again": again, "fetch": fetched, "state": ctx.state(str(x.tid))}


@probe("kip360.fenced-by-new-instance", tags=("KIP-360",), configs=LEVELS)
def fenced_by_new_instance(ctx: ProbeContext) -> Outcome:
    """A second InitProducerId (-1/-1) for the same transactional id fences the first
    instance: its write, AddPartitionsToTxn and EndTxn are refused."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, version=9)
    y = ctx.txn(x.tid)
    ctx.stable(topic)
    return {
        "same_id": y.producer_id == x.producer_id,
        "epoch": y.epoch - x.epoch,
        "old_produce": ctx.produce(x, topic, version=9)["error"],
        "old_add": ctx.add_partitions_error(x, topic),
        "old_end": ctx.end(x, True, version=3),
        "fetch": ctx.fetch(topic, isolation=0)["batches"],
    }


@probe("kip360.idempotent-first-sequence", tags=("KIP-360",), configs=LEVELS)
def idempotent_first_sequence(ctx: ProbeContext) -> Outcome:
    """An idempotent producer the partition does not know may start at any sequence (its
    state may have been removed with the log); after that, a gap is out of order and a
    duplicate answers with the first write's offset."""
    topic, x = ctx.topic(), ctx.idempotent()
    first = ctx.produce(x, topic, transactional=False, tid=False, sequence=5)
    gap = ctx.produce(x, topic, transactional=False, tid=False, sequence=8)
    again = ctx.produce(x, topic, transactional=False, tid=False, sequence=5)
    nxt = ctx.produce(x, topic, transactional=False, tid=False, sequence=6)
    return {"first": first, "gap": gap, "duplicate": again, "next": nxt}


@probe("kip360.idempotent-epoch-bump", tags=("KIP-360",), configs=LEVELS)
def idempotent_epoch_bump(ctx: ProbeContext) -> Outcome:
    """An idempotent producer bumps its epoch itself (KIP-360): the new epoch must start at
    sequence 0, and the old epoch is then refused."""
    topic, x = ctx.topic(), ctx.idempotent()
    ctx.produce(x, topic, transactional=False, tid=False, count=2)
    bumped_nonzero = ctx.produce(
        x, topic, transactional=False, tid=False, epoch=x.epoch + 1, sequence=3
    )
    bumped = ctx.produce(x, topic, transactional=False, tid=False, epoch=x.epoch + 1, sequence=0)
    old = ctx.produce(x, topic, transactional=False, tid=False, sequence=2)
    return {
        "new_epoch_nonzero_sequence": bumped_nonzero,
        "new_epoch": bumped,
        "old_epoch": old,
        "producers": ctx.producers(topic)["producers"],
    }


@probe("kip360.producer-state-outlives-deleted-records", tags=("KIP-360",), configs=LEVELS)
def state_outlives_deleted(ctx: ProbeContext) -> Outcome:
    """KIP-360's prolonged retention: the producer's state stays after DeleteRecords
    removes all its records, so its next in-order write is accepted and an out-of-order
    one is not."""
    topic, x = ctx.topic(), ctx.idempotent()
    ctx.produce(x, topic, transactional=False, tid=False, count=3)
    deleted = ctx.delete_records(topic, 0, 3)
    after = ctx.producers(topic)
    gap = ctx.produce(x, topic, transactional=False, tid=False, sequence=7)
    in_order = ctx.produce(x, topic, transactional=False, tid=False, sequence=3)
    return {"deleted": deleted, "producers": after, "gap": gap, "in_order": in_order}


@probe("kip360.transactional-write-with-old-epoch", tags=("KIP-360",), configs=LEVELS)
def transactional_old_epoch(ctx: ProbeContext) -> Outcome:
    """After InitProducerId bumped the epoch (KIP-360 recovery), a write at the previous
    epoch is refused with INVALID_PRODUCER_EPOCH (abortable), the new epoch works."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, version=9)
    old = x.epoch
    r = ctx.init(x.tid, producer_id=x.producer_id, epoch=x.epoch)
    x.new_epoch(int(r.producer_epoch))
    ctx.stable(topic)
    late = ctx.produce(x, topic, version=9, epoch=old, sequence=1)
    added = ctx.add_partitions(x, {topic: [0]})
    fresh = ctx.produce(x, topic, version=9)
    ended = ctx.end(x, True, version=3)
    ctx.stable(topic)
    return {"late": late, "add": added, "fresh": fresh, "end": ended, "lso": ctx.offsets(topic)}


@probe("kip360.init-fresh-aborts-open-transaction", tags=("KIP-360",), configs=LEVELS)
def init_fresh_aborts_open(ctx: ProbeContext) -> Outcome:
    """InitProducerId without an id/epoch (-1/-1: a new instance, or the admin's
    forceTerminateTransaction) while a transaction is open: the transaction is aborted
    (markers at which epoch) and which epoch the new instance gets."""
    topic, x = ctx.topic(), ctx.txn()
    base = x.epoch
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, version=9)
    again = _init(ctx, x.tid, -1, -1, base)
    ctx.stable(topic)
    fetched = ctx.fetch(topic, isolation=0)
    for batch in fetched["batches"]:
        batch[3] -= base
    described = ctx.describe(str(x.tid))
    described["epoch"] = int(described["epoch"]) - base
    return {"again": again, "fetch": fetched, "describe": described}
