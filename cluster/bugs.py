"""Bug switches: settings that put a reported hanging-transaction bug back into the
cluster, so the harness can show it detected and the defense that closed it.

Each switch is a ``txnchaos.bug.*`` node setting, off by default, and changes as
little code as the real bug did (one condition at the place named in ``site``).
The catalogue of reproductions (scenarios/repro/) builds on these; the defenses
Kafka ships as ordinary settings (``transaction.version``,
``transaction.partition.verification.enable``) need no switch of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BugSwitch:
    setting: str  # the node setting that turns the bug on
    field: str  # the attribute of BugSwitches that carries it
    report: str  # the public bug report or design section it recreates
    design: str  # the design document (KIP) and section whose rule it breaks
    symptom: str  # what a user of the broken cluster sees
    site: str  # where the one changed condition lives


BUG_SWITCHES: tuple[BugSwitch, ...] = (
    BugSwitch(
        setting="txnchaos.bug.producer.expiry.ignores.open.transactions",
        field="producer_expiry_ignores_open_transactions",
        report="KAFKA-9144",
        design="KIP-664, Motivation; KIP-360, producer state retention",
        symptom="producer state is expired under an open transaction; its marker then "
        "finds no transaction to end and the LSO stays behind forever (a hanging "
        "transaction)",
        site="cluster/broker/producer_state.py ProducerStateManager.remove_expired",
    ),
    BugSwitch(
        setting="txnchaos.bug.transaction.timeout.never.fires",
        field="transaction_timeout_never_fires",
        report="KAFKA-5132 (the timeout it recreates the absence of)",
        design="KIP-664, Motivation: a transaction nobody ends",
        symptom="a transaction whose producer died is never aborted by the coordinator; "
        "its partitions' LSO stays behind",
        site="cluster/coordinator/transactions/coordinator.py abort_timed_out_transactions",
    ),
    BugSwitch(
        setting="txnchaos.bug.coordinator.load.skips.pending.markers",
        field="coordinator_load_skips_pending_markers",
        report="KAFKA-16352 (transactions stuck in PrepareCommit/PrepareAbort)",
        design="KIP-664, Analysis: the coordinator and the replicas disagree",
        symptom="a coordinator that takes over (or restarts) does not resend the markers "
        "of transactions it loads in PrepareCommit/PrepareAbort: they never complete, "
        "their partitions' LSO stays behind and their producers get "
        "CONCURRENT_TRANSACTIONS until they give up",
        site="cluster/coordinator/transactions/coordinator.py load_partition",
    ),
    BugSwitch(
        setting="txnchaos.bug.lso.ignores.open.transactions",
        field="lso_ignores_open_transactions",
        report="third-party brokers' read_committed bugs (LSO equal to the high watermark)",
        design="KIP-98's aborted-transaction index, LSO Tracking",
        symptom="read_committed consumers read records of open transactions, "
        "including ones later aborted (uncommitted and aborted reads)",
        site="cluster/broker/partition.py Partition.last_stable_offset",
    ),
    BugSwitch(
        setting="txnchaos.bug.fetch.ignores.aborted.index",
        field="fetch_ignores_aborted_index",
        report="third-party brokers' read_committed bugs (no AbortedTransactions in Fetch)",
        design="KIP-98's aborted-transaction index, Fetch algorithm",
        symptom="read_committed consumers read records of aborted transactions",
        site="cluster/broker/partition.py Partition.read",
    ),
    BugSwitch(
        setting="txnchaos.bug.two.phase.commit.timeout",
        field="two_phase_commit_timeout",
        report="KIP-939's guarantee broken (a participant aborting a prepared transaction)",
        design="KIP-939, Kafka as a Participant in 2PC: no timeout for 2PC",
        symptom="a prepared two-phase-commit transaction is aborted once it has been open "
        "longer than transaction.max.timeout.ms: the external coordinator's commit then "
        "fails and the database and Kafka disagree",
        site="cluster/coordinator/transactions/coordinator.py abort_timed_out_transactions",
    ),
    BugSwitch(
        setting="txnchaos.bug.init.aborts.prepared.transaction",
        field="init_aborts_prepared_transaction",
        report="KIP-939's guarantee broken (InitProducerId ignoring keepPreparedTxn)",
        design="KIP-939, InitProducerId: KeepPreparedTxn keeps the open transaction",
        symptom="a new producer instance that asks to keep the prepared transaction "
        "(initTransactions(true), the recovery recipe) aborts it instead: the transaction "
        "the external coordinator committed is lost from Kafka",
        site="cluster/coordinator/transactions/coordinator.py TransactionCoordinator._init",
    ),
    BugSwitch(
        setting="txnchaos.bug.tv2.fence.epoch.overflow",
        field="tv2_fence_epoch_overflow",
        report="KAFKA-19367 (InitProducerId or a timeout under TV2 bumps the epoch twice)",
        design="KIP-890, Bump Epoch on Each Transaction for New Clients: epoch overflow",
        symptom="a transaction open at the last usable epoch (32,766) that the coordinator "
        "must fence (its timeout, or a new producer instance) cannot be aborted: the fence "
        "and the TV2 abort bump the epoch past Short.MAX_VALUE and the abort fails, every "
        "time; the transaction stays open and its partitions' LSO behind",
        site="cluster/coordinator/transactions/metadata.py "
        "TransactionMetadata.prepare_fence_and_abort",
    ),
    BugSwitch(
        setting="txnchaos.bug.tv2.abort.retry.hands.out.max.epoch",
        field="tv2_abort_retry_hands_out_max_epoch",
        report="KAFKA-20090 (a timed-out TV2 transaction at the last epoch hands its "
        "producer epoch Short.MAX_VALUE)",
        design="KIP-890, Bump Epoch on Each Transaction for New Clients: epoch overflow",
        symptom="a transaction at the last usable epoch (32,766) that times out is aborted "
        "at 32,767 on the same producer id, and the producer's own EndTxn(abort) after it "
        "is answered as a retry with epoch 32,767: its next transaction, at MAX, can never "
        "end or be fenced; it stays open and its partitions' LSO behind",
        site="cluster/coordinator/transactions/coordinator.py "
        "TransactionCoordinator._end_txn_tv2 (retry_on_bump) and _check_producer",
    ),
    BugSwitch(
        setting="txnchaos.bug.unknown.producer.strict",
        field="unknown_producer_strict",
        report="KAFKA-7190 (Kafka <= 2.4: UNKNOWN_PRODUCER_ID after retention removed a "
        "producer's records)",
        design="KIP-360, Motivation: UNKNOWN_PRODUCER_ID for a producer the partition lost",
        symptom="a write of a producer whose state the partition no longer has, at a "
        "non-zero sequence, gets UNKNOWN_PRODUCER_ID (Kafka >= 2.5 accepts it): the "
        "clients' KIP-360 recovery (abort, InitProducerId with id and epoch) runs",
        site="cluster/broker/producer_state.py ProducerStateManager.validate",
    ),
)

BY_SETTING: dict[str, BugSwitch] = {b.setting: b for b in BUG_SWITCHES}


@dataclass(frozen=True, slots=True)
class BugSwitches:
    """Which bugs a node runs with; all off is a correct node."""

    producer_expiry_ignores_open_transactions: bool = False
    transaction_timeout_never_fires: bool = False
    coordinator_load_skips_pending_markers: bool = False
    lso_ignores_open_transactions: bool = False
    fetch_ignores_aborted_index: bool = False
    two_phase_commit_timeout: bool = False
    init_aborts_prepared_transaction: bool = False
    tv2_fence_epoch_overflow: bool = False
    tv2_abort_retry_hands_out_max_epoch: bool = False
    unknown_producer_strict: bool = False

    @classmethod
    def from_settings(cls, settings: Any) -> BugSwitches:
        """From a ``NodeSettings`` (or anything with ``get(name)``)."""
        return cls(**{b.field: bool(settings.get(b.setting)) for b in BUG_SWITCHES})

    def enabled(self) -> list[BugSwitch]:
        return [b for b in BUG_SWITCHES if getattr(self, b.field)]


NO_BUGS = BugSwitches()
