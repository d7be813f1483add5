"""hostile_client: a transactional producer on our own client that, beside honest
transactions, sends protocol-legal requests a correct cluster must refuse (the probes of
``harness/workload/probes.py``) and records each as a PROBE op; the ``refused_request``
checker flags a probe the cluster accepted, or whose record a reader saw.

Each task is one flow, the flows taken in turn (``probes``):

* ``sequence_gap``: a transaction writes a record to a partition, then a batch of the same
  transaction whose sequence skips one; the transaction commits.
* ``non_transactional_in_transaction``: the same, with a non-transactional batch at the next
  sequence (the producer id and epoch of the open transaction).
* ``idempotent``: a new idempotent producer id writes at its epoch, moves to the next epoch
  at sequence 0 (a KIP-360 bump, accepted), then probes the old epoch, a sequence gap and a
  new epoch at a sequence other than 0.
* ``commit_after_abort``: a transaction writes and aborts; once the abort's markers are
  written, an EndTxn(commit) with the ids that transaction had.
* ``offsets_outside_transaction``: a transaction sends offsets for the user's group (they
  are pending there); an OffsetFetch with require_stable for that partition (KIP-447: a
  correct cluster answers UNSTABLE_OFFSET_COMMIT); a second transactional id that never
  added the group sends a TxnOffsetCommit for it; the first transaction commits.
* ``zombie``: a transaction writes; a new instance of the same transactional id initialises
  (fencing it); the old instance sends a Produce at its next sequence and an EndTxn(commit).
  The new instance carries on as the user's producer.
* ``produce_after_abort``, ``produce_into_next``, ``end_txn_into_next``: KIP-890's late
  requests (``late_transactions.py``), recorded as ordinary transactions. The last two only
  at transaction.version 2: under the old protocol a correct cluster (Apache Kafka too)
  lets them through, which is what KIP-890's second part is for.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ....rundir.schema import Outcome, encode_value
from ..clients import ClientError, ProducerReset
from ..probes import Ids, ProbingProducer
from ..workers import FLUSH_TIMEOUT_S, WorkerContext
from .kind import UserKind
from .late_transactions import FLOWS as LATE_FLOWS
from .tv2_producer import Tv2ProducerSpec, Tv2ProducerWorker, our_producer

if TYPE_CHECKING:
    from ..config import WorkloadConfig

Flow = Literal[
    "sequence_gap",
    "non_transactional_in_transaction",
    "idempotent",
    "commit_after_abort",
    "offsets_outside_transaction",
    "zombie",
    "produce_after_abort",
    "produce_into_next",
    "end_txn_into_next",
]
ALL_FLOWS: tuple[Flow, ...] = (
    "sequence_gap",
    "idempotent",
    "commit_after_abort",
    "zombie",
    "non_transactional_in_transaction",
    "offsets_outside_transaction",
    "produce_after_abort",
    "end_txn_into_next",
    "produce_into_next",
)

#: flows a correct cluster defends only at transaction.version 2 (KIP-890 part 2)
TV2_ONLY: frozenset[str] = frozenset({"produce_into_next", "end_txn_into_next"})


class HostileClientSpec(Tv2ProducerSpec):
    """A ``tv2_producer`` whose every task is a probe flow (module doc). ``transaction_version``
    chooses the protocol of its transactions (1: the old one, which KIP-890 verifies)."""

    kind: Literal["hostile_client"] = "hostile_client"  # type: ignore[assignment]
    probes: list[Flow] | None = Field(
        default=None,
        min_length=1,
        description="the flows, taken in turn (default: all of them that a correct cluster "
        "refuses at the user's transaction_version)",
    )
    group_id: str = Field(
        default="{process}-offsets",
        description="the group the offsets flow commits to; {process} is substituted",
    )

    def flows(self) -> list[Flow]:
        if self.probes is not None:
            return list(self.probes)
        old = self.transaction_version is not None and self.transaction_version < 2
        return [f for f in ALL_FLOWS if not (old and f in TV2_ONLY)]

    def problem_in(self, config: WorkloadConfig) -> str | None:
        old = self.transaction_version is not None and self.transaction_version < 2
        wrong = sorted(TV2_ONLY & set(self.flows())) if old else []
        if wrong:
            return (
                f"probes {wrong} need transaction_version 2: under the old protocol a correct "
                "cluster does not refuse them (KIP-890 part 2)"
            )
        return super().problem_in(config)


class HostileClientWorker(Tv2ProducerWorker):
    request_type = "hostile"
    spec: HostileClientSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.plain = 0  # index of the next non-transactional value
        self.offsets_group = spec.group_id.format(process=process)
        self.other: ProbingProducer | None = None

    def open_clients(self) -> None:
        self.client = self._new_client(self.transactional_id)

    def _new_client(self, transactional_id: str) -> ProbingProducer:
        c = our_producer(self, transactional_id, None, ProbingProducer)
        assert isinstance(c, ProbingProducer)
        return c

    def close_clients(self, abort_open: bool) -> None:
        if self.other is not None:
            self.other.close()
            self.other = None
        super().close_clients(abort_open)

    def c(self) -> ProbingProducer:
        assert isinstance(self.client, ProbingProducer)
        return self.client

    def transaction(self) -> Outcome:
        flows = self.spec.flows()
        flow = flows[self.steps % len(flows)]
        self.steps += 1
        if flow in LATE_FLOWS:
            return LATE_FLOWS[flow](self)
        return getattr(self, f"flow_{flow}")()

    # -- pieces -----------------------------------------------------------------------------

    def probe_value(self, kind: str) -> str:
        """A value no honest write uses (four fields: never parsed as a workload value)."""
        self.plain += 1
        return f"{self.process}|probe|{kind}|{self.plain}"

    def honest_record(self, txn: int) -> tuple[str, int] | None:
        """One acknowledged record of ``txn`` in a partition; None: the transaction must
        abort."""
        c = self.c()
        topic, partition = self.rng.choice(self.partitions())
        c.send(topic, partition, encode_value(self.process, txn, 0), txn=txn)
        c.flush(FLUSH_TIMEOUT_S)
        return None if c.txn_abortable else (topic, partition)

    def end(self, txn: int, commit: bool = True) -> Outcome:
        c = self.c()
        if commit and not c.txn_abortable:
            return c.commit(txn, self.spec.op_timeout_s, self.spec.commit_retries)
        c.abort(txn, self.spec.op_timeout_s, self.spec.commit_retries)
        return Outcome.FAIL

    def _txn_probe(self, kind: str, transactional: bool, skip: int) -> Outcome:
        c = self.c()
        txn = self.begin()
        tp = self.honest_record(txn)
        if tp is None:
            return self.end(txn, commit=False)
        topic, partition = tp
        value = self.probe_value(kind)
        ids = c.ids()
        seq = c.next_sequence(topic, partition) + skip
        send = c.produce(topic, partition, value, ids, seq, transactional=transactional)
        item = {"topic": topic, "partition": partition, "value": value}
        c.probe(kind, ids, send, item, txn=txn, transactional_id=self.transactional_id)
        return self.end(txn)

    # -- the flows --------------------------------------------------------------------------

    def flow_sequence_gap(self) -> Outcome:
        return self._txn_probe("sequence_gap", transactional=True, skip=1)

    def flow_non_transactional_in_transaction(self) -> Outcome:
        return self._txn_probe("non_transactional_in_transaction", transactional=False, skip=0)

    def flow_idempotent(self) -> Outcome:
        c = self.c()
        producer, first = c.idempotent_ids()
        try:
            topic, partition = self.rng.choice(self.partitions())
            bumped = Ids(first.producer_id, first.epoch + 1)
            for ids in (first, bumped):
                self.plain += 1
                value = encode_value(self.process, None, self.plain)
                send = c.produce(
                    topic, partition, value, ids, 0, transactional=False, producer=producer
                )
                if not c.record_write(topic, partition, value, ids, send):
                    return Outcome.FAIL
            probes = (
                ("stale_epoch", first, 1),
                ("idempotent_sequence_gap", bumped, 2),
                ("new_epoch_nonzero_sequence", Ids(first.producer_id, first.epoch + 2), 5),
            )
            for kind, ids, seq in probes:
                value = self.probe_value(kind)
                send = c.produce(
                    topic, partition, value, ids, seq, transactional=False, producer=producer
                )
                item = {"topic": topic, "partition": partition, "value": value}
                c.probe(kind, ids, send, item)
            return Outcome.OK
        finally:
            c.close_other(producer)

    def flow_commit_after_abort(self) -> Outcome:
        c = self.c()
        txn = self.begin()
        tp = self.honest_record(txn)
        ids = c.ids()
        tv = c.producer.transaction_version if c.producer is not None else 0
        c.abort(txn, self.spec.op_timeout_s, self.spec.commit_retries)
        if tp is None:
            return Outcome.FAIL
        c.wait_finished()
        send = c.end_txn(ids, commit=True, version_cap=5 if tv >= 2 else 4)
        c.probe("commit_after_abort", ids, send, txn=txn, transactional_id=self.transactional_id)
        return Outcome.FAIL

    def flow_offsets_outside_transaction(self) -> Outcome:
        from confluent_kafka import TopicPartition

        from ...clients import GroupMetadata

        c = self.c()
        txn = self.begin()
        # before the transaction's first request: the coordinator's timeout starts later
        begun = time.monotonic()
        tp = self.honest_record(txn)
        if tp is None:
            return self.end(txn, commit=False)
        topic, partition = tp
        # offset 0: the group reads nothing (the analysis takes a group with transactional
        # offsets for a copier, whose inputs below its position need outputs)
        offset = 0
        group = GroupMetadata(self.offsets_group)
        c.send_offsets(
            txn,
            [TopicPartition(topic, partition, offset)],
            group,
            self.offsets_group,
            self.spec.op_timeout_s,
        )
        # the offset is pending in the group: a stable fetch must be refused; only while the
        # transaction is surely still open (within half its timeout, leaving the other half for
        # the request to arrive: a coordinator that aborted it would rightly answer the last
        # committed offset)
        if (
            not c.txn_abortable
            and time.monotonic() - begun < self.spec.transaction_timeout_ms / 2000
        ):
            ids = c.ids()
            send = c.offset_fetch_stable(self.offsets_group, topic, partition)
            c.probe(
                "unstable_offset_fetch",
                ids,
                send,
                {"topic": topic, "partition": partition, "offset": offset},
                txn=txn,
                group_id=self.offsets_group,
                transactional_id=self.transactional_id,
            )
        other = self._other()
        if other is not None:
            ids = other.ids()
            send = other.txn_offset_commit(self.offsets_group, topic, partition, offset + 1, ids)
            other.probe(
                "offsets_outside_transaction",
                ids,
                send,
                {"topic": topic, "partition": partition, "offset": offset + 1},
                group_id=self.offsets_group,
                transactional_id=other.transactional_id,
            )
        return self.end(txn)

    def _other(self) -> ProbingProducer | None:
        """A second transactional id of this user, initialised, that never begins a
        transaction (None: its init failed; the next flow tries again)."""
        if self.other is None:
            other = self._new_client(f"{self.transactional_id}-other")
            try:
                other.init(self.spec.op_timeout_s)
            except ProducerReset:
                other.close()
                return None
            self.other = other
        return self.other

    def flow_zombie(self) -> Outcome:
        old = self.c()
        txn = self.begin()
        tp = self.honest_record(txn)
        if tp is None:
            return self.end(txn, commit=False)
        topic, partition = tp
        ids = old.ids()
        tv = old.producer.transaction_version if old.producer is not None else 0
        seq = old.next_sequence(topic, partition)
        new = self._new_client(self.transactional_id)
        try:
            new.init(self.spec.op_timeout_s)
        except ProducerReset:
            new.close()
            return self.end(txn, commit=False)
        value = self.probe_value("zombie_produce")
        send = old.produce(topic, partition, value, ids, seq, transactional=True)
        item = {"topic": topic, "partition": partition, "value": value}
        old.probe(
            "zombie_produce", ids, send, item, txn=txn, transactional_id=self.transactional_id
        )
        send = old.end_txn(ids, commit=True, version_cap=5 if tv >= 2 else 4)
        old.probe("zombie_commit", ids, send, txn=txn, transactional_id=self.transactional_id)
        old.open_txn = None
        old.close(abort_open=False)
        self.client = new
        return Outcome.FAIL

    def step(self) -> None:
        try:
            self.transaction()
        except ProducerReset:
            self.reset()
        except ClientError:
            self._abort_if_open()


KIND = UserKind(
    spec=HostileClientSpec,
    worker=HostileClientWorker,
    prefix="hostile",
    locust_user="HostileClientUser",
    crash_holds={},
)
