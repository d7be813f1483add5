"""KIP-939: participation in two-phase commit (Enable2Pc, KeepPreparedTxn): no timeout
for a 2PC transaction, a prepared transaction kept across a producer's restart and the
cluster's, completed with the epoch InitProducerId returned."""

from __future__ import annotations

import time
from collections.abc import Generator

from ..catalogue import Outcome, probe
from ..context import ProbeContext, Txn

INT_MAX = 2**31 - 1


def _init(ctx: ProbeContext, tid: str, base: int, version: int = 6, **kw: object) -> Outcome:
    r = ctx.init(tid, version=version, **kw)  # type: ignore[arg-type]
    rel = int(r.producer_epoch) - base if int(r.producer_epoch) >= 0 else -1
    ongoing_id = int(getattr(r, "ongoing_txn_producer_id", -1))  # v6 only
    ongoing_epoch = int(getattr(r, "ongoing_txn_producer_epoch", -1))
    return {
        "error": ctx.err(r.error_code),
        "producer": ctx.p(r.producer_id),
        "epoch": rel,
        "ongoing": [
            ctx.p(ongoing_id),
            ongoing_epoch - base if ongoing_epoch >= 0 else -1,
        ],
    }


def _prepared(ctx: ProbeContext, topic: str) -> Txn:
    """A 2PC producer with a transaction written to ``topic`` (Produce v12), not ended."""
    x = ctx.txn(version=6, enable2pc=True)
    ctx.produce(x, topic, count=2, version=12)
    return x


@probe("kip939.enable2pc-when-disabled", tags=("KIP-939",), configs=("tv2-v6",))
def enable2pc_disabled(ctx: ProbeContext) -> Outcome:
    """InitProducerId with Enable2Pc on a cluster without
    transaction.two.phase.commit.enable is refused."""
    tid = ctx.name("x")
    return {"init": _init(ctx, tid, 0, enable2pc=True)}


@probe("kip939.enable2pc", tags=("KIP-939",), configs=("tv2-2pc", "tv1-2pc"))
def enable2pc(ctx: ProbeContext) -> Outcome:
    """InitProducerId with Enable2Pc: what DescribeTransactions then says of its timeout."""
    tid = ctx.name("x")
    init = _init(ctx, tid, 0, enable2pc=True)
    return {"init": init, "describe": ctx.describe(tid)}


@probe("kip939.keep-prepared-without-2pc", tags=("KIP-939",), configs=("tv2-2pc",))
def keep_without_2pc(ctx: ProbeContext) -> Outcome:
    """KeepPreparedTxn without Enable2Pc is refused (KIP-939: "disallowing
    keepPreparedTxn=true without 2PC")."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    return {
        "init": _init(ctx, str(x.tid), x.epoch, keep_prepared=True),
        "state": ctx.state(str(x.tid)),
    }


@probe("kip939.keep-prepared-nothing-open", tags=("KIP-939",), configs=("tv2-2pc",))
def keep_nothing_open(ctx: ProbeContext) -> Outcome:
    """KeepPreparedTxn when no transaction is open: the ongoing id and epoch are -1."""
    x = ctx.txn(version=6, enable2pc=True)
    return {"init": _init(ctx, str(x.tid), x.epoch, enable2pc=True, keep_prepared=True)}


@probe("kip939.keep-prepared-then-commit", tags=("KIP-939",), configs=("tv2-2pc",))
def keep_then_commit(ctx: ProbeContext) -> Outcome:
    """A restarted 2PC producer keeps its prepared transaction (InitProducerId returns the
    ongoing id/epoch and a new epoch), commits it with the new epoch, and the records
    become visible; the previous instance is fenced."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    base = x.epoch
    init = _init(ctx, str(x.tid), base, enable2pc=True, keep_prepared=True)
    during = ctx.state(str(x.tid))
    old_write = ctx.produce(x, topic, version=12)["error"]
    if init["error"] != "NONE":
        return {"init": init, "state_during": during}
    y = Txn(x.tid, x.producer_id, base + int(init["epoch"]))
    ended = ctx.end(y, True, version=5)
    ctx.stable(topic)
    fetched = ctx.fetch(topic)
    for batch in fetched["batches"]:
        batch[3] -= base
    return {
        "init": init,
        "state_during": during,
        "old_instance_write": old_write,
        "end": ended,
        "epoch_after": y.epoch - base,
        "fetch": fetched,
    }


@probe("kip939.keep-prepared-then-abort", tags=("KIP-939",), configs=("tv2-2pc",))
def keep_then_abort(ctx: ProbeContext) -> Outcome:
    """The same, aborting the kept transaction."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    base = x.epoch
    init = _init(ctx, str(x.tid), base, enable2pc=True, keep_prepared=True)
    if init["error"] != "NONE":
        return {"init": init, "state": ctx.state(str(x.tid))}
    y = Txn(x.tid, x.producer_id, base + int(init["epoch"]))
    ended = ctx.end(y, False, version=5)
    ctx.stable(topic)
    return {"end": ended, "fetch": ctx.fetch(topic)["aborted"], "state": ctx.state(str(x.tid))}


@probe("kip939.init-without-keep-aborts", tags=("KIP-939",), configs=("tv2-2pc",))
def init_without_keep(ctx: ProbeContext) -> Outcome:
    """InitProducerId without KeepPreparedTxn aborts the 2PC producer's open transaction
    (what forceTerminateTransaction does)."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    init = _init(ctx, str(x.tid), x.epoch, enable2pc=True)
    ctx.stable(topic)
    return {"init": init, "aborted": ctx.fetch(topic)["aborted"], "state": ctx.state(str(x.tid))}


@probe("kip939.no-timeout", tags=("KIP-939",), configs=("tv2-2pc",))
def no_timeout(ctx: ProbeContext) -> Outcome:
    """A 2PC transaction does not time out: asked for with a 1 s timeout, it is still open
    three seconds later (a plain one beside it is aborted)."""
    topic = ctx.topic(2)
    x = ctx.txn(version=6, enable2pc=True, timeout_ms=1000)
    plain = ctx.txn(timeout_ms=1000)
    ctx.produce(x, topic, 0, version=12)
    ctx.produce(plain, topic, 1, version=12)
    ctx.wait_state(str(plain.tid), "CompleteAbort")
    time.sleep(2.0)  # the coordinator's timeout scan runs every 0.5 s
    return {"two_phase": ctx.describe(str(x.tid)), "plain": ctx.state(str(plain.tid))}


@probe("kip939.int-max-timeout-without-2pc", tags=("KIP-939",), configs=("tv2", "tv2-2pc"))
def int_max_timeout(ctx: ProbeContext) -> Outcome:
    """A transaction timeout of Int.MaxValue without Enable2Pc (InitProducerId v5) is an
    ordinary timeout (above transaction.max.timeout.ms: refused), not a 2PC transaction."""
    tid = ctx.name("x")
    return {"init": _init(ctx, tid, 0, version=5, timeout_ms=INT_MAX)}


@probe("kip939.prepared-survives-restart", tags=("KIP-939",), configs=("tv2-2pc",))
def survives_restart(ctx: ProbeContext) -> Generator[None, None, Outcome]:
    """A prepared 2PC transaction survives the cluster's restart (the transaction log):
    still Ongoing, kept by KeepPreparedTxn and committed afterwards."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    yield
    base = x.epoch
    state = ctx.state(str(x.tid))
    init = _init(ctx, str(x.tid), base, enable2pc=True, keep_prepared=True)
    if init["error"] != "NONE":
        return {"state": state, "init": init}
    y = Txn(x.tid, x.producer_id, base + int(init["epoch"]))
    ended = ctx.end(y, True, version=5)
    ctx.stable(topic)
    return {"state": state, "init": init, "end": ended, "fetch": ctx.fetch(topic)["batches"]}


@probe("kip939.two-phase-producer-commits", tags=("KIP-939",), configs=("tv2-2pc",))
def two_phase_commits(ctx: ProbeContext) -> Outcome:
    """A 2PC producer ends its own transaction (prepared, then committed by the same
    instance): EndTxn v5 bumps the epoch as for any TV2 transaction."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    base = x.epoch
    ended = ctx.end(x, True, version=5)
    ctx.stable(topic)
    fetched = ctx.fetch(topic)
    for batch in fetched["batches"]:
        batch[3] -= base
    return {"end": ended, "epoch": x.epoch - base, "fetch": fetched, "state": ctx.state(str(x.tid))}


@probe("kip939.two-phase-timeout-after-restart", tags=("KIP-939",), configs=("tv2-2pc",))
def two_phase_no_timeout_after_restart(ctx: ProbeContext) -> Generator[None, None, Outcome]:
    """A 2PC transaction read back from the transaction log after a restart still has no
    timeout (and is still open)."""
    topic = ctx.topic()
    x = _prepared(ctx, topic)
    yield
    time.sleep(1.5)  # three of the coordinator's timeout scans
    return {"describe": ctx.describe(str(x.tid)), "offsets": ctx.offsets(topic)}
