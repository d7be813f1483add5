"""Verifying pipelined Produce requests together (KIP-890 part 1, old clients).

librdkafka sends one Produce request per partition and pipelines them on one connection;
the server answers a connection's requests one at a time, in order, as Kafka does. So a
transaction's first writes to three partitions of a broker cost three verification round
trips to the coordinator, one after another. When a Produce needs verification, this
module also takes the partitions of the Produce requests already received behind it on the
same connection (same transactional id, producer id and epoch) into the same
AddPartitionsToTxn VerifyOnly request, and keeps each positive answer for the very frame it
was asked for.

Why that is as safe as verifying each request on its own: those frames were received before
the question was asked, so the answer is one the coordinator could have given them had the
broker verified them then; and each partition's guard is started before the question goes
out, so a marker written meanwhile still voids the answer (the append checks the guard).
An answer is never used by a request that arrived after the question.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..protocol.codec import ProtocolError, UnsupportedApi, decode_request_as
from ..protocol.record_batch import CorruptBatch, parse_header
from .partition import Partition
from .verification_state import SENTINEL, VerificationGuard

PRODUCE = 0
_PREFIX = struct.Struct(">hh")
MAX_AGE_S = 60.0
"""An answer whose frame was never served (its connection closed) is dropped after this."""

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class VerifiedAhead:
    """The partitions of one frame verified ahead, each with the guard it was verified
    under (an answer holds only while that guard is still the partition's)."""

    frame: bytes  # kept so that its identity is not reused while the answer waits
    producer_id: int
    producer_epoch: int
    guards: dict[TopicPartition, VerificationGuard]
    created: float

    def guards_for(
        self, producer_id: int, producer_epoch: int
    ) -> dict[TopicPartition, VerificationGuard]:
        same = producer_id == self.producer_id and producer_epoch == self.producer_epoch
        return self.guards if same else {}


@dataclass(frozen=True, slots=True)
class Ahead:
    """A partition of a pipelined frame, verified together with the current request."""

    frame: bytes
    partition: TopicPartition
    guard: VerificationGuard


class VerificationLookahead:
    def __init__(
        self,
        local_partition: Callable[[str, int], Partition | None],
        topic_name: Callable[[uuid.UUID], str | None] = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._local_partition = local_partition
        self._topic_name = topic_name  # Produce v13 names topics by id
        self._clock = clock
        self._answers: dict[int, VerifiedAhead] = {}  # id(frame) -> its verified partitions

    def pipelined(
        self,
        frames: Iterable[bytes],
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
    ) -> list[Ahead]:
        """The partitions of the Produce frames in ``frames`` (received after the current
        request) that this producer's transaction writes for the first time, each with its
        guard started now."""
        out: list[Ahead] = []
        for frame in frames:
            if len(frame) < _PREFIX.size:
                continue
            api_key, version = _PREFIX.unpack_from(frame, 0)
            if api_key != PRODUCE:
                continue
            try:
                _, request = decode_request_as(frame, PRODUCE, version)
            except (ProtocolError, UnsupportedApi):
                continue  # refused when its turn comes
            if request.transactional_id != transactional_id:
                continue
            for t in request.topic_data:
                name = t.name if version < 13 else self._topic_name(t.topic_id)
                if name is None:
                    continue  # an unknown id: answered when its turn comes
                for p in t.partition_data:
                    guard = self._start(name, p.index, p.records, producer_id, producer_epoch)
                    if guard is not None:
                        out.append(Ahead(frame, (name, p.index), guard))
        return out

    def _start(
        self, topic: str, index: int, records: bytes | None, pid: int, epoch: int
    ) -> VerificationGuard | None:
        partition = self._local_partition(topic, index)
        if partition is None or not records:
            return None
        try:
            header = parse_header(records)
        except CorruptBatch:
            return None
        if not header.is_transactional or header.producer_id != pid:
            return None
        if header.producer_epoch != epoch:
            return None
        guard = partition.start_verification(pid, epoch)
        return None if guard is SENTINEL else guard

    def keep(
        self, ahead: list[Ahead], failed: Iterable[TopicPartition], pid: int, epoch: int
    ) -> None:
        """Keep the coordinator's positive answers for the frames they were asked for."""
        refused = set(failed)
        now = self._clock()
        self._drop_old(now)
        for a in ahead:
            if a.partition in refused:
                continue
            answer = self._answers.get(id(a.frame))
            if answer is None:
                answer = self._answers[id(a.frame)] = VerifiedAhead(a.frame, pid, epoch, {}, now)
            answer.guards[a.partition] = a.guard

    def take(self, frame: bytes | None) -> VerifiedAhead | None:
        """What was verified ahead for ``frame`` (this very request), if anything; forgets
        it (an answer serves its request once)."""
        if frame is None or not self._answers:
            return None
        answer = self._answers.get(id(frame))
        if answer is None or answer.frame is not frame:
            return None
        del self._answers[id(frame)]
        return answer

    def _drop_old(self, now: float) -> None:
        old = [key for key, a in self._answers.items() if now - a.created > MAX_AGE_S]
        for key in old:
            del self._answers[key]

    def __len__(self) -> int:
        return len(self._answers)
