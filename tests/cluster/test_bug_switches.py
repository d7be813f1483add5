"""The bug switches' catalogue (cluster/bugs.py) and the switches whose effect a unit
test shows; the others are shown on real nodes in
tests/integration/test_bug_switches.py."""

from __future__ import annotations

import uuid
from dataclasses import fields
from pathlib import Path

from tests.cluster.coordinator.transactions.txn_support import NONE, Harness, async_test
from txnchaos.cluster.bugs import BUG_SWITCHES, BugSwitches
from txnchaos.cluster.coordinator.transactions import TxnState
from txnchaos.cluster.coordinator.transactions.config import TxnConfig
from txnchaos.cluster.settings import SPECS, NodeSettings


def test_every_switch_is_a_documented_setting_off_by_default() -> None:
    assert {f.name for f in fields(BugSwitches)} == {b.field for b in BUG_SWITCHES}
    for b in BUG_SWITCHES:
        assert b.setting.startswith("txnchaos.bug.")
        assert SPECS[b.setting].default is False
        assert b.report and b.design and b.symptom and b.site
    assert BugSwitches.from_settings(NodeSettings()).enabled() == []


def test_a_switch_set_on_a_node_reaches_the_coordinator_config() -> None:
    setting = "txnchaos.bug.transaction.timeout.never.fires"
    settings = NodeSettings.from_pairs([f"{setting}=true"])
    assert [b.setting for b in BugSwitches.from_settings(settings).enabled()] == [setting]
    assert TxnConfig.from_settings(settings).bugs.transaction_timeout_never_fires


@async_test
async def test_timeout_bug_leaves_the_transaction_open(tmp_path: Path) -> None:
    for bug, expected in ((False, ["tx"]), (True, [])):
        h = Harness(tmp_path / str(bug), bugs=BugSwitches(transaction_timeout_never_fires=bug))
        h.start()
        _, pid, epoch = await h.init(timeout_ms=1_000)
        assert set((await h.add(pid, epoch, {"t1": [0]})).values()) == {NONE}
        h.clock.advance(60_000)
        assert h.coordinator.abort_timed_out_transactions() == expected
        md = h.coordinator.metadata("tx")
        assert md is not None
        assert (md.state == TxnState.ONGOING) == bug
        h.crash()


@async_test
async def test_a_restarted_coordinator_with_the_bug_leaves_prepared_transactions_stuck(
    tmp_path: Path,
) -> None:
    """``txnchaos.bug.coordinator.load.skips.pending.markers`` (KAFKA-16352): the
    markers of a transaction loaded in PrepareCommit are never sent again."""
    for bug, expected in ((False, TxnState.COMPLETE_COMMIT), (True, TxnState.PREPARE_COMMIT)):
        h = Harness(
            tmp_path / str(bug), bugs=BugSwitches(coordinator_load_skips_pending_markers=bug)
        ).start()
        _, pid, epoch = await h.init()
        assert set((await h.add(pid, epoch, {"t1": [0]})).values()) == {NONE}
        h.transport.down = {1}  # the leader is unreachable: the markers stay pending
        assert await h.end(pid, epoch, True) == NONE
        h.transport.down = set()
        h = h.restart()  # a new incarnation loads the transaction in PrepareCommit
        await h.flush()
        md = h.coordinator.metadata("tx")
        assert md is not None and md.state == expected
        h.crash()


async def _open_at_the_last_epoch(path: Path, **bugs: bool) -> tuple[Harness, int]:
    """A TV2 coordinator with ``bugs`` and a transaction (1 s timeout) open at epoch 32,766,
    where 32,766 transactions of a TV2 producer leave it; the harness and producer id."""
    h = Harness(path, bugs=BugSwitches(**bugs), transaction_version=lambda: 2).start()
    _, pid, _epoch = await h.init(timeout_ms=1_000)
    md = h.coordinator.metadata("tx")
    assert md is not None
    md.producer_epoch = 32_766
    assert set((await h.add(pid, 32_766, {"t1": [0]})).values()) == {NONE}
    return h, pid


@async_test
async def test_a_fence_at_the_last_epoch_overflows_with_the_bug(tmp_path: Path) -> None:
    """``txnchaos.bug.tv2.fence.epoch.overflow`` (KAFKA-19367): under TV2 a transaction open
    at epoch 32,766 that times out cannot be aborted (the fence and the abort bump past
    Short.MAX_VALUE), every time; without the bug it is aborted at epoch MAX."""
    for bug, expected in ((False, ["tx"]), (True, [])):
        h, pid = await _open_at_the_last_epoch(tmp_path / str(bug), tv2_fence_epoch_overflow=bug)
        for _ in range(2):  # every cleanup round fails the same way with the bug
            h.clock.advance(60_000)
            assert h.coordinator.abort_timed_out_transactions() == (expected if _ == 0 else [])
        await h.flush()
        md = h.coordinator.metadata("tx")
        assert md is not None
        if bug:  # the fenced epoch stays (the producer's own EndTxn is fenced), still open
            assert md.state == TxnState.ONGOING and md.producer_epoch == 32_767
            assert (await h.end(pid, 32_766, True)) != NONE
        else:
            assert md.state == TxnState.COMPLETE_ABORT and md.producer_epoch == 32_767
        h.crash()


@async_test
async def test_a_timed_out_abort_at_the_last_epoch_hands_out_max_with_the_bug(
    tmp_path: Path,
) -> None:
    """``txnchaos.bug.tv2.abort.retry.hands.out.max.epoch`` (KAFKA-20090): the timeout's fence
    of a TV2 transaction at epoch 32,766 aborts it at Short.MAX_VALUE on the same producer id;
    the producer's own EndTxn(abort) at 32,766 is then answered as a retry with epoch MAX, and
    the transaction it opens there can never end. Without the bug that EndTxn is fenced."""
    for bug in (False, True):
        h, pid = await _open_at_the_last_epoch(
            tmp_path / str(bug), tv2_abort_retry_hands_out_max_epoch=bug
        )
        h.clock.advance(60_000)
        assert h.coordinator.abort_timed_out_transactions() == ["tx"]
        await h.flush()
        assert h.state() == TxnState.COMPLETE_ABORT.value
        error, answered_pid, answered_epoch = await h.end2(pid, 32_766, False)
        if not bug:
            assert error != NONE  # fenced: the coordinator never hands out MAX
        else:
            assert (error, answered_pid, answered_epoch) == (NONE, pid, 32_767)
            assert set((await h.add(pid, 32_767, {"t1": [0]})).values()) == {NONE}
            assert (await h.end2(pid, 32_767, True))[0] != NONE
            assert h.state() == TxnState.ONGOING.value
        h.crash()


def test_unknown_producer_strict_restores_kafka_2_4s_unknown_producer_id(tmp_path: Path) -> None:
    """Kafka >= 2.5 accepts a write at any sequence from a producer the partition has no
    state for; ``txnchaos.bug.unknown.producer.strict`` answers UNKNOWN_PRODUCER_ID."""
    from tests.cluster.record_batches import make_batch
    from txnchaos.cluster.broker.partition import Partition
    from txnchaos.cluster.broker.producer_state import UNKNOWN_PRODUCER_ID
    from txnchaos.cluster.protocol.record_batch import parse_header
    from txnchaos.cluster.storage import LogConfig

    for bug, expected in ((False, 0), (True, UNKNOWN_PRODUCER_ID)):
        part = Partition(
            "t",
            uuid.uuid4(),
            0,
            tmp_path / str(bug),
            LogConfig(),
            bugs=BugSwitches(unknown_producer_strict=bug),
        )
        batch = make_batch(producer_id=7, epoch=0, base_sequence=5)
        assert part.producer_state.validate(parse_header(batch)).error_code == expected
