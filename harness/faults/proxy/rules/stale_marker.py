"""``stale_marker``: a copy of a transaction marker reaches a broker again at a moment when
the broker must refuse it, so that a broker that takes it ends the wrong transaction.

A marker request can arrive twice: a coordinator retries it, a network duplicates it, an old
coordinator incarnation's request is still on its way. A broker tells a harmless repeat from
a stale marker by epochs, and this rule delivers a copy of an earlier marker exactly when
the epochs, or the coordinator's incarnation, say *stale*, right after the broker answered a
write of the marker's producer to the marker's partition (before that answer reaches the
client, so the producer's next transaction is open there):

* **TV2, same epoch.** Under KIP-890 (transaction version 2) every transaction ends with a
  marker at a newly bumped epoch, and the producer's next transaction runs at that epoch. A
  copy of that marker arriving while the next transaction is open at the partition has the
  epoch of the open transaction: a broker must refuse it (a marker of a TV2 transaction has
  a higher epoch than the transaction's records), not take it for a retry of a marker it
  already wrote.
* **An older producer epoch**, any transaction version: the producer has re-initialised
  since (a restart, KIP-360's bump after an abortable error), and the broker has just
  written a batch of its newer epoch: a marker of an older epoch is a zombie's.
* **TV0/1, same producer epoch, an older coordinator incarnation.** At transaction version
  0 and 1 a producer keeps its epoch from one transaction to the next, so no producer epoch
  tells an old marker from a fresh one. The harness knows when a coordinator's process was
  replaced (it killed or restarted the node: ``ClusterHandle`` tells the proxy fleet, which
  numbers each node's incarnations and stamps every connection it accepts from a node with
  the node's incarnation then); the copy is delivered once the broker has written (answered
  without error) a marker of that producer at that partition from a newer incarnation of
  the node that sent the copy. A coordinator bumps its coordinator epoch whenever it loads
  its transaction-log partition, so the copy's coordinator epoch is older than the one the
  broker remembers: a broker must refuse it. (A coordinator that keeps its coordinator
  epoch across a restart gets it written, and no epoch at the proxy shows that.)
* **TV0/1, same producer epoch, older coordinator epoch**, for the copies the previous
  reason does not reach (another coordinator node's, or one whose node the proxy does not
  know): the copy is delivered once the broker has written a marker of that producer at
  that partition from a newer coordinator epoch (the coordinator moved since), which it
  must remember.

A copy carries one marker for one partition and goes over a connection the proxy opens to
the broker for it alone; its answer goes to no one. Every delivered copy is one fault-log
line (``stale_marker``) with the marker, why it was stale and what the broker answered
(``result``: ``fenced`` when it refused it with an epoch error, ``written`` when it wrote it:
a broken defence, which the history then shows as a transaction ended by a marker that was
not its own). A correct broker refuses every copy, so the rule changes nothing a client sees
on a correct cluster.

Install it on the links that carry both the markers (the coordinator's links to the brokers)
and the writes (the client links): the default link ``*`` does. Produce requests that name
their topics by id only (v13+) cannot be matched with a marker's partition and bring nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import struct
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from kio.schema.errors import ErrorCode
from pydantic import Field, field_validator, model_validator

from txnchaos.cluster.protocol.codec import (
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
)
from txnchaos.cluster.protocol.error_names import error_name
from txnchaos.cluster.protocol.record_batch import CorruptBatch, parse_header

from ..apis import PRODUCE, WRITE_TXN_MARKERS
from .base import Direction, FrameRuleBase
from .runtime import RuleState

if TYPE_CHECKING:
    from ..link import Request, Response

Address = tuple[str, int]
Partition = tuple[str, int]
Node = str
"""A broker, named by what its links lead to (``n1`` of ``client->n1`` and ``n1001->n1``):
Apache Kafka's brokers take markers on their inter-broker listener and writes on their
client listener, two addresses of one broker."""

DELIVERY_TIMEOUT_S = 5.0
"""How long a copy's own connection waits to connect and for its answer."""
_SIZE = struct.Struct(">i")
_EPOCH_ERRORS = frozenset(
    int(e)
    for e in (
        ErrorCode.invalid_producer_epoch,
        ErrorCode.producer_fenced,
        ErrorCode.transaction_coordinator_fenced,
    )
)


@dataclass(frozen=True)
class MarkerCopy:
    """One marker of one partition, as a coordinator sent it."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    transaction_version: int
    commit: bool
    partition: Partition
    upstream: Address  # where the marker went (a copy goes there too)
    request: Any  # the WriteTxnMarkers request body with only this marker and partition
    api_version: int
    client_id: str | None
    #: the coordinator node that sent it and that node's incarnation when the proxy accepted
    #: the connection it came on (None: not from a node's link)
    source: tuple[int, int] | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "coordinator_epoch": self.coordinator_epoch,
            "transaction_version": self.transaction_version,
            "commit": self.commit,
            "partition": f"{self.partition[0]}-{self.partition[1]}",
        }
        if self.source is not None:
            out["source"] = {"node": self.source[0], "incarnation": self.source[1]}
        return out


@dataclass(eq=False)
class Copies:
    """A stale_marker rule's run-time state (kept beside its :class:`RuleState`)."""

    #: the copies not delivered yet, by broker and producer id, oldest first
    kept: dict[tuple[Node, int], deque[MarkerCopy]] = field(default_factory=dict)
    #: the newest coordinator epoch of a marker each broker wrote, by partition and producer
    written: dict[tuple[Node, Partition, int], int] = field(default_factory=dict)
    #: the newest incarnation of each coordinator node a marker each broker wrote came from,
    #: by partition, producer and coordinator node
    written_by: dict[tuple[Node, Partition, int, int], int] = field(default_factory=dict)
    #: requests awaiting their answer, by (connection, correlation id): the markers sent, or
    #: a Produce's transactional batches (partition -> producer id and epoch)
    markers_sent: dict[tuple[int, int], list[MarkerCopy]] = field(default_factory=dict)
    writes: dict[tuple[int, int], dict[Partition, tuple[int, int]]] = field(default_factory=dict)
    delivered: int = 0


_COPIES: weakref.WeakKeyDictionary[RuleState, Copies] = weakref.WeakKeyDictionary()


def copies_of(st: RuleState) -> Copies:
    found = _COPIES.get(st)
    if found is None:
        found = _COPIES[st] = Copies()
    return found


class StaleMarkerRule(FrameRuleBase):
    """Keep a copy of every marker; deliver it again once the broker must refuse it."""

    kind: Literal["stale_marker"] = "stale_marker"
    api: list[int] | None = [WRITE_TXN_MARKERS, PRODUCE]
    direction: Direction = "both"
    #: copies kept per broker and producer (the oldest are forgotten)
    max_copies: int = Field(default=64, ge=1, le=100_000)
    #: copies delivered at most, over the rule's life
    max_deliveries: int = Field(default=1_000, ge=1)

    stage: ClassVar[int] = 25  # after the rules that drop or strip: copy what goes on
    acts_on_responses: ClassVar[bool] = True

    @field_validator("api", mode="after")
    @classmethod
    def _markers_and_writes(cls, v: list[int] | None) -> list[int] | None:
        if v is None or sorted(set(v)) != sorted({WRITE_TXN_MARKERS, PRODUCE}):
            raise ValueError(
                "stale_marker reads WriteTxnMarkers (the copies) and Produce (the writes "
                "that make them stale): api must be those two"
            )
        return v

    @model_validator(mode="after")
    def _fields(self) -> StaleMarkerRule:
        if self.direction != "both":
            raise ValueError("stale_marker reads requests and their answers: direction both")
        if self.nth is not None or self.probability != 1.0:
            raise ValueError("stale_marker reads every marker and write: no nth, probability")
        return self

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        key = (id(request.conn), request.corr)
        if request.api_key == WRITE_TXN_MARKERS:
            upstream = request.conn.link.upstream
            sent = (
                _marker_copies(request.frame, upstream, request.conn.source)
                if upstream is not None
                else []
            )
            if not sent:
                return False
            node = _node(request.conn.link.name)
            for st in states:
                c = copies_of(st)
                _awaiting(c.markers_sent)[key] = sent
                for copy in sent:
                    kept = c.kept.setdefault(
                        (node, copy.producer_id), deque(maxlen=st.rule.max_copies)
                    )
                    kept.append(copy)
        elif request.info is not None:  # a Produce with an answer (acks != 0)
            batches = _transactional_batches(request.frame)
            if batches:  # the copies are chosen at the answer: markers may pass meanwhile
                for st in states:
                    _awaiting(copies_of(st).writes)[key] = batches
        return False

    @classmethod
    async def on_response(cls, states: list[RuleState], response: Response) -> None:
        key = (id(response.conn), response.corr)
        node = _node(response.conn.link.name)
        api_key, version = response.info.api_key, response.info.api_version
        for st in states:
            c = copies_of(st)
            if api_key == WRITE_TXN_MARKERS:
                sent = c.markers_sent.pop(key, None)
                if sent:
                    _remember_written(c, node, sent, _marker_errors(version, response.frame[4:]))
                continue
            batches = c.writes.pop(key, None)
            if not batches:
                continue
            errors = _produce_errors(version, response.frame[4:])
            for partition, (pid, epoch) in batches.items():
                if errors.get(partition) != 0:
                    continue
                for copy, why in _stale_copies(c, node, partition, pid, epoch):
                    if c.delivered >= st.rule.max_deliveries:
                        return
                    c.delivered += 1
                    await _deliver(response, st, copy, why, epoch)


def _node(link: str) -> Node:
    return link.rsplit("->", 1)[-1]


_AWAITING_MAX = 10_000
"""Requests remembered at most while their answers are awaited: an answer that never comes
(a dropped response, a closed connection) leaves its entry behind, the oldest go first."""

T = TypeVar("T")


def _awaiting(table: dict[tuple[int, int], T]) -> dict[tuple[int, int], T]:
    while len(table) >= _AWAITING_MAX:
        del table[next(iter(table))]
    return table


def _stale_copies(
    c: Copies, node: Node, partition: Partition, pid: int, epoch: int
) -> list[tuple[MarkerCopy, str]]:
    """The kept copies of ``pid``'s markers at ``partition`` that the broker must refuse now
    that it wrote a batch of ``pid`` at ``epoch`` there (they are taken out of the store)."""
    kept = c.kept.get((node, pid))
    if not kept:
        return []
    newest_coordinator = c.written.get((node, partition, pid), -1)
    out: list[tuple[MarkerCopy, str]] = []
    for copy in list(kept):
        if copy.partition != partition:
            continue
        why = None
        if copy.producer_epoch < epoch:
            why = f"producer epoch {copy.producer_epoch} is older than the write's {epoch}"
        elif copy.producer_epoch == epoch and copy.transaction_version >= 2:
            why = f"TV2 marker at epoch {epoch}, the epoch of the transaction open there"
        elif copy.producer_epoch == epoch and (older := _older_incarnation(c, node, pid, copy)):
            why = f"older coordinator incarnation: {older}"
        elif copy.producer_epoch == epoch and copy.coordinator_epoch < newest_coordinator:
            why = (
                f"coordinator epoch {copy.coordinator_epoch} is older than the "
                f"{newest_coordinator} of a marker the broker wrote since"
            )
        if why is not None:
            kept.remove(copy)
            out.append((copy, why))
    return out


def _older_incarnation(c: Copies, node: Node, pid: int, copy: MarkerCopy) -> str | None:
    """Why ``copy`` comes from an older incarnation of its coordinator node than a marker of
    ``pid`` that ``node`` wrote at the copy's partition since; None if it does not."""
    if copy.source is None:
        return None
    node_id, incarnation = copy.source
    newer = c.written_by.get((node, copy.partition, pid, node_id), -1)
    if newer <= incarnation:
        return None
    return f"n{node_id} incarnation {incarnation}, a marker of incarnation {newer} written since"


def _remember_written(
    c: Copies, node: Node, sent: list[MarkerCopy], errors: dict[tuple[int, Partition], int]
) -> None:
    for copy in sent:
        if errors.get((copy.producer_id, copy.partition)) == 0:
            where = (node, copy.partition, copy.producer_id)
            c.written[where] = max(c.written.get(where, -1), copy.coordinator_epoch)
            if copy.source is not None:
                by = (*where, copy.source[0])
                c.written_by[by] = max(c.written_by.get(by, -1), copy.source[1])


async def _deliver(
    response: Response, st: RuleState, copy: MarkerCopy, why: str, epoch: int
) -> None:
    """Send ``copy`` over a connection of its own; log what the broker answered."""
    params: dict[str, Any] = {
        **st.rule.params(),
        "marker": copy.describe(),
        "stale_because": why,
        "write_epoch": epoch,
    }
    fault = response.open_fault("stale_marker", params)
    frame = encode_request(0, copy.request, copy.client_id)
    try:
        answer = await asyncio.wait_for(_exchange(copy.upstream, frame), DELIVERY_TIMEOUT_S)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        response.close_fault(fault, result=f"no answer: {exc or type(exc).__name__}")
        return
    errors = _marker_errors(copy.api_version, answer)
    code = errors.get((copy.producer_id, copy.partition))
    if code is None:
        result = "no answer for its partition"
    elif code == 0:
        result = "written"
    elif code in _EPOCH_ERRORS:
        result = "fenced"
    else:
        result = "refused"
    response.close_fault(fault, result=result, error=_error_name(code))


async def _exchange(upstream: Address, frame: bytes) -> bytes:
    """Write one request frame on a fresh connection; its response (without the size)."""
    reader, writer = await asyncio.open_connection(*upstream)
    try:
        writer.write(frame)
        await writer.drain()
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        return await reader.readexactly(size)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _marker_copies(
    frame: bytes, upstream: Address, source: tuple[int, int] | None
) -> list[MarkerCopy]:
    """One copy per marker and partition of a WriteTxnMarkers request going to ``upstream``
    from ``source`` (none if it does not decode)."""
    try:
        header, body = decode_request(bytes(frame[4:]))
    except ProtocolError:
        return []
    out: list[MarkerCopy] = []
    for marker in body.markers:
        for topic in marker.topics:
            for p in topic.partition_indexes:
                one_topic = dataclasses.replace(topic, partition_indexes=(p,))
                one = dataclasses.replace(marker, topics=(one_topic,))
                out.append(
                    MarkerCopy(
                        producer_id=int(marker.producer_id),
                        producer_epoch=int(marker.producer_epoch),
                        coordinator_epoch=int(marker.coordinator_epoch),
                        transaction_version=int(getattr(marker, "transaction_version", 0)),
                        commit=bool(marker.transaction_result),
                        partition=(topic.name, int(p)),
                        upstream=upstream,
                        request=dataclasses.replace(body, markers=(one,)),
                        api_version=int(header.request_api_version),
                        client_id=header.client_id,
                        source=source,
                    )
                )
    return out


def _transactional_batches(frame: bytes) -> dict[Partition, tuple[int, int]]:
    """The partitions a Produce request writes a transactional batch to, with the batch's
    producer id and epoch (topics named by id only are left out)."""
    try:
        _, body = decode_request(bytes(frame[4:]))
    except ProtocolError:
        return {}
    out: dict[Partition, tuple[int, int]] = {}
    for topic in body.topic_data:
        name = getattr(topic, "name", None)
        if not name:
            continue
        for part in topic.partition_data:
            try:
                header = parse_header(part.records or b"")
            except CorruptBatch:
                continue
            if header.magic == 2 and header.is_transactional:
                out[(name, int(part.index))] = (header.producer_id, header.producer_epoch)
    return out


def _produce_errors(version: int, answer: bytes) -> dict[Partition, int]:
    """A Produce answer's error code per partition (``answer``: without its size)."""
    try:
        _, body = decode_response(PRODUCE, version, bytes(answer))
    except ProtocolError:
        return {}
    return {
        (t.name, int(p.index)): int(p.error_code)
        for t in body.responses
        if getattr(t, "name", None)
        for p in t.partition_responses
    }


def _marker_errors(version: int, answer: bytes) -> dict[tuple[int, Partition], int]:
    """A WriteTxnMarkers answer's error code per producer and partition (without size)."""
    try:
        _, body = decode_response(WRITE_TXN_MARKERS, version, bytes(answer))
    except ProtocolError:
        return {}
    return {
        (int(m.producer_id), (t.name, int(p.partition_index))): int(p.error_code)
        for m in body.markers
        for t in m.topics
        for p in t.partitions
    }


def _error_name(code: int | None) -> str:
    return "none" if code is None else error_name(code)
