"""KIP-664: ListTransactions, DescribeTransactions, DescribeProducers and the admin
abort (WriteTxnMarkers with coordinator epoch -1)."""

from __future__ import annotations

from ..catalogue import Outcome, probe
from ..context import ProbeContext


@probe("kip664.describe-ongoing", tags=("KIP-664",), configs=("tv2", "tv0"))
def describe_ongoing(ctx: ProbeContext) -> Outcome:
    """DescribeTransactions of an open transaction: Ongoing, its partitions, a start time."""
    topic, x = ctx.topic(2), ctx.txn(timeout_ms=45000)
    ctx.add_partitions(x, {topic: [0, 1]})
    ctx.produce(x, topic, 0, version=9)
    return {"describe": ctx.describe(str(x.tid))}


@probe("kip664.describe-empty", tags=("KIP-664",), configs=("tv2", "tv0"))
def describe_empty(ctx: ProbeContext) -> Outcome:
    """DescribeTransactions of an id with nothing in progress: Empty, start time -1."""
    x = ctx.txn()
    return {"describe": ctx.describe(str(x.tid))}


@probe("kip664.describe-unknown", tags=("KIP-664",), configs=("tv2",))
def describe_unknown(ctx: ProbeContext) -> Outcome:
    """DescribeTransactions of an id the coordinator never saw."""
    tid = ctx.name("x")
    ctx.coordinator_ready(tid)
    return {"describe": ctx.describe(tid)}


@probe("kip664.describe-producers", tags=("KIP-664",), configs=("tv2", "tv0"))
def describe_producers(ctx: ProbeContext) -> Outcome:
    """DescribeProducers while a transaction is open (its first offset) and after it
    committed (none open)."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, count=3, version=9)
    during = ctx.producers(topic)
    ctx.end(x, True, version=3)
    ctx.stable(topic)
    return {"during": during, "after": ctx.producers(topic)}


def _three_states(ctx: ProbeContext) -> tuple[str, dict[str, object]]:
    """Transactional ids in Ongoing, Empty, CompleteCommit and CompleteAbort."""
    topic = ctx.topic()
    ongoing, empty, committed, aborted = ctx.txn(), ctx.txn(), ctx.txn(), ctx.txn()
    ctx.add_partitions(ongoing, {topic: [0]})
    for x, commit in ((committed, True), (aborted, False)):
        ctx.add_partitions(x, {topic: [0]})
        ctx.produce(x, topic, version=9)
        ctx.end(x, commit, version=3)
    ctx.wait_state(str(committed.tid), "CompleteCommit")
    ctx.wait_state(str(aborted.tid), "CompleteAbort")
    return topic, {"ongoing": ongoing, "empty": empty, "committed": committed, "aborted": aborted}


@probe("kip664.list-state-filters", tags=("KIP-664",), configs=("tv2", "tv0"))
def list_state_filters(ctx: ProbeContext) -> Outcome:
    """ListTransactions with no filter, one state, two states and an unknown state."""
    _three_states(ctx)
    return {
        "all": ctx.list_txns(),
        "ongoing": ctx.list_txns(["Ongoing"]),
        "complete": ctx.list_txns(["CompleteCommit", "CompleteAbort"]),
        "unknown": ctx.list_txns(["Bogus", "Empty"]),
    }


@probe("kip664.list-producer-filter", tags=("KIP-664",), configs=("tv2",))
def list_producer_filter(ctx: ProbeContext) -> Outcome:
    """ListTransactions by producer id (and a producer id nobody has)."""
    _, xs = _three_states(ctx)
    ongoing = xs["ongoing"]
    pid = ongoing.producer_id  # type: ignore[attr-defined]
    return {
        "one": ctx.list_txns(producers=[pid]),
        "with_state": ctx.list_txns(["Empty"], producers=[pid]),
        "nobody": ctx.list_txns(producers=[pid + 10**9], mine=False),
    }


@probe("kip664.list-duration-filter", tags=("KIP-664",), configs=("tv2",))
def list_duration_filter(ctx: ProbeContext) -> Outcome:
    """ListTransactions v1's DurationFilter: transactions running longer than the value
    (0: every running one, a day: none; -1: no filter); v0 has no such filter."""
    _three_states(ctx)
    return {
        "zero": ctx.list_txns(duration_ms=0),
        "a_day": ctx.list_txns(duration_ms=86_400_000),
        "none": ctx.list_txns(duration_ms=-1),
        "v0": ctx.list_txns(version=0),
    }


@probe("kip664.describe-completed", tags=("KIP-664",), configs=("tv2", "tv0"))
def describe_completed(ctx: ProbeContext) -> Outcome:
    """DescribeTransactions after a commit and after an abort."""
    _, xs = _three_states(ctx)
    return {
        "committed": ctx.describe(str(xs["committed"].tid)),  # type: ignore[attr-defined]
        "aborted": ctx.describe(str(xs["aborted"].tid)),  # type: ignore[attr-defined]
    }


@probe("kip664.describe-producers-unknown-partition", tags=("KIP-664",), configs=("tv2",))
def producers_unknown(ctx: ProbeContext) -> Outcome:
    """DescribeProducers of a partition that does not exist, and of an empty one."""
    topic = ctx.topic()
    return {"missing": ctx.producers(topic, 5), "empty": ctx.producers(topic)}


@probe("kip664.admin-abort-hanging", tags=("KIP-664",), configs=("tv0-noverify", "tv2-noverify"))
def admin_abort_hanging(ctx: ProbeContext) -> Outcome:
    """The admin abort of a hanging transaction (a write without AddPartitionsToTxn and no
    verification): WriteTxnMarkers v1 with coordinator epoch -1 and the producer's
    epoch ends it; the LSO moves on."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.produce(x, topic, version=9)
    before = ctx.producers(topic)
    aborted = ctx.write_markers(x, topic)
    if aborted == "NONE":
        ctx.stable(topic)
    return {
        "before": before,
        "abort": aborted,
        "after": ctx.producers(topic),
        "fetch": ctx.fetch(topic),
        "coordinator_state": ctx.state(str(x.tid)),
    }


@probe("kip664.admin-abort-stale-epoch", tags=("KIP-664",), configs=("tv2",))
def admin_abort_stale_epoch(ctx: ProbeContext) -> Outcome:
    """An admin abort naming an epoch below the producer's is refused; one naming a
    producer with nothing open writes its marker anyway."""
    topic, x = ctx.topic(), ctx.txn()
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, version=9)
    ctx.end(x, True, version=3)
    ctx.stable(topic)
    r = ctx.init(x.tid, producer_id=x.producer_id, epoch=x.epoch)
    old = x.epoch
    x.new_epoch(int(r.producer_epoch))
    x.epoch = old
    stale = ctx.write_markers(x, topic) if old >= 0 else "-"
    x.epoch = int(r.producer_epoch)
    nothing_open = ctx.write_markers(x, topic)
    return {
        "stale": stale,
        "nothing_open": nothing_open,
        "fetch": ctx.fetch(topic, isolation=0)["batches"],
    }


@probe("kip664.transaction-timeout", tags=("KIP-664", "KIP-890"), configs=("tv2", "tv0"))
def transaction_timeout(ctx: ProbeContext) -> Outcome:
    """A transaction past its timeout is aborted by the coordinator, which bumps the
    epoch to fence the producer: the producer's next EndTxn is fenced."""
    topic, x = ctx.topic(), ctx.txn(timeout_ms=1000)
    ctx.add_partitions(x, {topic: [0]})
    ctx.produce(x, topic, version=9)
    ctx.wait_state(str(x.tid), "CompleteAbort")
    ctx.stable(topic)
    described = ctx.describe(str(x.tid))
    described["epoch"] = int(described["epoch"]) - x.epoch
    return {
        "describe": described,
        "end": ctx.end(x, True, version=3),
        "fetch": ctx.fetch(topic, isolation=0)["batches"],
    }
