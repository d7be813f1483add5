"""A hostile client's probes: protocol-legal requests that a correct cluster must refuse, sent
on purpose beside the honest traffic and recorded as PROBE ops (``history/schema.py``).

Honest clients never send these (librdkafka and our producer never leave a sequence gap, never
write a non-transactional batch inside their own transaction, never go back to an old epoch),
so the checks that refuse them are invisible to a workload of honest clients alone: a cluster
that lost one of them would pass every run. :class:`ProbingProducer` sends each probe once
(no retry), after the honest requests that set up the state it needs were acknowledged, and
records what it sent and the answer: ``ok`` (the cluster accepted it: a broken defence),
``fail`` with the error (refused), ``info`` (no answer).

The refusals a correct cluster gives, by probe kind (Apache Kafka's rules:
``ProducerAppendInfo`` for the partition's producer-state checks, the transaction
coordinator's ``endTransaction`` and KIP-890's verification for the rest; measured on Apache
Kafka 4.x with ``--launcher kafka``, see docs/hostile-client.md) are :data:`EXPECTED`. The
checker (``refused_request``) judges only acceptance and visibility, never which error came
back: the codes differ between versions and under faults (NOT_LEADER, a lost answer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ...cluster.protocol.error_names import error_name
from ...rundir.schema import EventType, Outcome
from ..clients import KafkaClientError
from ..clients.batch import Record, encode_batch
from ..clients.errors import UNSUPPORTED_VERSION, UnsupportedError
from ..clients.metadata import KEY_GROUP, KEY_TRANSACTION
from ..clients.producer import Producer
from .late_requests import OP_TIMEOUT_S, LateRequestProducer
from .ours import describe

API_PRODUCE = 0
API_OFFSET_FETCH = 9
OFFSET_FETCH_STABLE = 7
API_END_TXN = 26
API_TXN_OFFSET_COMMIT = 28

#: probe kind -> the error Apache Kafka answers (recorded with each probe as its ``source``)
EXPECTED: dict[str, str] = {
    # a transactional batch whose sequence skips one, in the producer's open transaction
    "sequence_gap": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    # a non-transactional batch with the producer id and epoch of an open transaction
    "non_transactional_in_transaction": "INVALID_TXN_STATE",
    # an idempotent batch at the epoch before the one the partition has seen
    "stale_epoch": "INVALID_PRODUCER_EPOCH",
    # an idempotent batch that moves to a new epoch at a sequence other than 0
    "new_epoch_nonzero_sequence": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    # an idempotent batch whose sequence skips one
    "idempotent_sequence_gap": "OUT_OF_ORDER_SEQUENCE_NUMBER",
    # EndTxn(commit) for a transaction whose abort completed
    "commit_after_abort": "INVALID_TXN_STATE",
    # TxnOffsetCommit of a producer whose transaction never added the group
    "offsets_outside_transaction": "INVALID_TXN_STATE",
    # OffsetFetch(require_stable) of a partition whose offset the producer's open transaction
    # holds pending (KIP-447: a consumer must not resume from the last stable offset yet)
    "unstable_offset_fetch": "UNSTABLE_OFFSET_COMMIT",
    # a fenced instance's Produce in its (aborted) transaction, after a new instance's init
    "zombie_produce": "INVALID_PRODUCER_EPOCH",
    # a fenced instance's EndTxn(commit), after a new instance's init
    "zombie_commit": "PRODUCER_FENCED",
}


def _stable_fetch_version(served: tuple[int, int] | None) -> int:
    """OffsetFetch v7: the first with require_stable, the last with one group per request (our
    client's version table does not list OffsetFetch: only the probe sends it)."""
    if served is None or not served[0] <= OFFSET_FETCH_STABLE <= served[1]:
        raise UnsupportedError(
            f"OffsetFetch v{OFFSET_FETCH_STABLE} not served (node: {served})", UNSUPPORTED_VERSION
        )
    return OFFSET_FETCH_STABLE


#: a raw request, sent when called: (the error code answered, the offset a write got)
Raw = Callable[[], Coroutine[Any, Any, tuple[int, int | None]]]


@dataclasses.dataclass(frozen=True)
class Ids:
    """The producer id and epoch a raw request carries."""

    producer_id: int
    epoch: int


class ProbingProducer(LateRequestProducer):
    """Our recording producer, able to send raw requests a correct cluster refuses."""

    # -- recording ------------------------------------------------------------------------

    def probe(
        self,
        kind: str,
        ids: Ids,
        send: Raw,
        item: dict[str, Any] | None = None,
        *,
        txn: int | None = None,
        group_id: str | None = None,
        transactional_id: str | None = None,
    ) -> int:
        """Send one probe (``send`` returns the error code answered) and record it as a PROBE
        op; returns the code (-1: no answer)."""
        entry = {**(item or {}), "key": kind, "source": EXPECTED[kind]}
        fields: dict[str, Any] = {
            "transactional_id": transactional_id,
            "producer_id": ids.producer_id,
            "producer_epoch": ids.epoch,
        }
        if group_id is not None:
            fields["group_id"] = group_id
        op = self.writer.invoke(EventType.PROBE, items=[entry], txn=txn, **fields)
        try:
            code, _ = self._run(send(), OP_TIMEOUT_S)
        except KafkaClientError as exc:
            self.writer.complete(op, Outcome.INFO, error=describe(exc), **fields)
            self._report(f"probe {kind}", op.invoke_ns, Outcome.INFO, describe(exc))
            return -1
        outcome = Outcome.OK if code == 0 else Outcome.FAIL
        error = None if code == 0 else f"{error_name(code)} ({code})"
        self.writer.complete(op, outcome, error=error, **fields)
        # a refusal is what a probe wants: only an acceptance is a failure for locust
        self._report(
            f"probe {kind}", op.invoke_ns, Outcome.FAIL if code == 0 else Outcome.OK, error
        )
        return code

    def record_write(self, topic: str, partition: int, value: str, ids: Ids, send: Raw) -> bool:
        """An honest idempotent write sent raw (the setup of an idempotent probe), recorded as
        a SEND of no transaction; True when acknowledged."""
        item: dict[str, Any] = {"topic": topic, "partition": partition, "value": value}
        fields: dict[str, Any] = {"producer_id": ids.producer_id, "producer_epoch": ids.epoch}
        op = self.writer.invoke(EventType.SEND, items=[item], **fields)
        try:
            code, offset = self._run(send(), OP_TIMEOUT_S)
        except KafkaClientError as exc:
            self.writer.complete(op, Outcome.INFO, error=describe(exc), **fields)
            return False
        if code != 0:
            self.writer.complete(op, Outcome.FAIL, error=f"{error_name(code)} ({code})", **fields)
            return False
        done = {**item, "offset": offset}
        self.writer.complete(op, Outcome.OK, items=[done], **fields)
        return True

    # -- raw requests ---------------------------------------------------------------------

    def ids(self) -> Ids:
        cur = self._p().ids
        return Ids(cur.producer_id, cur.epoch)

    def next_sequence(self, topic: str, partition: int) -> int:
        return self._p().state.next_sequence(topic, partition)

    def produce(
        self,
        topic: str,
        partition: int,
        value: str,
        ids: Ids,
        sequence: int,
        *,
        transactional: bool,
        producer: Producer | None = None,
    ) -> Raw:
        """A raw Produce of one record with exactly these ids, sequence and transactional
        flag (the request names the transactional id only for a transactional batch), to
        send with :meth:`probe` or :meth:`record_write`."""
        p = producer or self._p()
        txn_id = p.config.transactional_id if transactional else None
        tv = p.sm.book.tv if transactional and p.transactional else 0
        timeout_s = p.config.request_timeout_ms / 1000

        async def send() -> tuple[int, int | None]:
            conn = await p.view.leader(topic, partition)
            await conn.negotiate(timeout_s)
            batch = encode_batch(
                [Record(None, value.encode(), (), int(time.time() * 1000))],
                producer_id=ids.producer_id,
                producer_epoch=ids.epoch,
                base_sequence=sequence,
                transactional=transactional,
            )
            entity = conn.build(
                API_PRODUCE,
                {
                    "transactional_id": txn_id,
                    "acks": -1,
                    "timeout": p.config.request_timeout_ms,
                    "topic_data": [
                        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
                    ],
                },
                version=conn.version(API_PRODUCE, 12 if tv >= 2 else 11),
            )
            response = await conn.send_entity(entity, timeout_s)
            part = response.responses[0].partition_responses[0]
            offset = int(part.base_offset)
            return int(part.error_code), (offset if offset >= 0 else None)

        return send

    def end_txn(self, ids: Ids, commit: bool, *, version_cap: int) -> Raw:
        """A raw EndTxn for this producer's transactional id with ``ids``."""
        p = self._p()
        txn_id = p.config.transactional_id
        assert txn_id is not None
        timeout_s = p.config.request_timeout_ms / 1000

        async def send() -> tuple[int, int | None]:
            conn = await p.view.coordinator(KEY_TRANSACTION, txn_id)
            await conn.negotiate(timeout_s)
            entity = conn.build(
                API_END_TXN,
                {
                    "transactional_id": txn_id,
                    "producer_id": ids.producer_id,
                    "producer_epoch": ids.epoch,
                    "committed": commit,
                },
                version=conn.version(API_END_TXN, version_cap),
            )
            response = await conn.send_entity(entity, timeout_s)
            return int(response.error_code), None

        return send

    def txn_offset_commit(
        self, group_id: str, topic: str, partition: int, offset: int, ids: Ids
    ) -> Raw:
        """A raw TxnOffsetCommit (v3-4: the old protocol, which KIP-890 verifies) of one offset
        for ``group_id`` with this producer's transactional id and ``ids``."""
        p = self._p()
        txn_id = p.config.transactional_id
        timeout_s = p.config.request_timeout_ms / 1000

        async def send() -> tuple[int, int | None]:
            conn = await p.view.coordinator(KEY_GROUP, group_id)
            await conn.negotiate(timeout_s)
            entity = conn.build(
                API_TXN_OFFSET_COMMIT,
                {
                    "transactional_id": txn_id,
                    "group_id": group_id,
                    "producer_id": ids.producer_id,
                    "producer_epoch": ids.epoch,
                    "generation_id": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": partition,
                                    "committed_offset": offset,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                },
                version=conn.version(API_TXN_OFFSET_COMMIT, 4),
            )
            response = await conn.send_entity(entity, timeout_s)
            codes = [int(q.error_code) for t in response.topics for q in t.partitions]
            return next((c for c in codes if c), 0), None

        return send

    def offset_fetch_stable(self, group_id: str, topic: str, partition: int) -> Raw:
        """A raw OffsetFetch (v7, require_stable) of one partition of ``group_id``; answers
        the partition's error (or the request's) and the offset it returned."""
        p = self._p()
        timeout_s = p.config.request_timeout_ms / 1000

        async def send() -> tuple[int, int | None]:
            conn = await p.view.coordinator(KEY_GROUP, group_id)
            await conn.negotiate(timeout_s)
            entity = conn.build(
                API_OFFSET_FETCH,
                {
                    "group_id": group_id,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "require_stable": True,
                },
                version=_stable_fetch_version(conn.versions.get(API_OFFSET_FETCH)),
            )
            response = await conn.send_entity(entity, timeout_s)
            if int(response.error_code):
                return int(response.error_code), None
            part = response.topics[0].partitions[0]
            offset = int(part.committed_offset)
            return int(part.error_code), (offset if offset >= 0 else None)

        return send

    def idempotent_ids(self) -> tuple[Producer, Ids]:
        """A new idempotent producer id (InitProducerId without a transactional id) and the
        producer whose connections send its writes."""
        p = self._p()
        config = dataclasses.replace(p.config, transactional_id=None, transaction_version=None)

        async def init() -> tuple[Producer, Ids]:
            ip = Producer(config)
            deadline = time.monotonic() + OP_TIMEOUT_S
            answer = await ip.txn.init_producer_id(deadline, bump=False)
            return ip, Ids(answer.producer_id, answer.epoch)

        return self._run(init(), OP_TIMEOUT_S)

    def close_other(self, producer: Producer) -> None:
        """Close a producer :meth:`idempotent_ids` made."""
        with contextlib.suppress(KafkaClientError):
            self._run(producer.close(5.0), 10.0)
