"""``strip_partition``: a WriteTxnMarkers request reaches the node without one of its
partitions, so the node writes no marker there and its answer leaves that partition out.

This is the partial answer a coordinator must not take as success: Kafka's coordinator
finds no result for the partition and treats the response as broken (our nodes retry the
partition). A coordinator that took the missing answer for "written" completes the
transaction with one partition still holding its records in an open transaction: the
partition's LSO stays behind them and a committed transaction's records there are never
read. Stripping only the response would show nothing: the node would have written the
marker anyway.

With ``answer`` (an error name, e.g. ``kafka_storage_error`` or ``not_leader_or_follower``)
the node's answer is given the stripped partition back with that error, as a broker that
could not write the marker there (a failing log directory, a leader that moved, a
partition still loading) answers: the marker was not written, and a coordinator must retry
it until it is or until its transaction is fenced. A coordinator that takes such an error
for "obsolete" and completes the transaction leaves the partition's records in an open
transaction for good.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from kio.schema.errors import ErrorCode
from pydantic import field_validator

from txnchaos.cluster.protocol.codec import (
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_class,
)

from ..apis import WRITE_TXN_MARKERS
from .base import FrameRuleBase
from .runtime import RuleState

if TYPE_CHECKING:
    import random

    from ..link import Request

#: the APIs whose requests the rule knows how to strip a partition from
STRIPPABLE = (WRITE_TXN_MARKERS,)


def strip_one(body: Any, rng: random.Random) -> tuple[Any, dict[str, Any]] | None:
    """``body`` (a WriteTxnMarkers request) without one partition, chosen by ``rng``, and
    what was stripped; None when it names no partition. A topic left with no partition is
    dropped from its marker; a marker left with no topic stays (the node answers it empty)."""
    places = [
        (m, t, p)
        for m, marker in enumerate(body.markers)
        for t, topic in enumerate(marker.topics)
        for p in range(len(topic.partition_indexes))
    ]
    if not places:
        return None
    m, t, p = rng.choice(places)
    marker = body.markers[m]
    topic = marker.topics[t]
    partitions = topic.partition_indexes[:p] + topic.partition_indexes[p + 1 :]
    topics = list(marker.topics)
    if partitions:
        topics[t] = dataclasses.replace(topic, partition_indexes=tuple(partitions))
    else:
        del topics[t]
    markers = list(body.markers)
    markers[m] = dataclasses.replace(marker, topics=tuple(topics))
    stripped = {
        "producer_id": int(marker.producer_id),
        "commit": bool(marker.transaction_result),
        "topic": topic.name,
        "partition": int(topic.partition_indexes[p]),
    }
    return dataclasses.replace(body, markers=tuple(markers)), stripped


def answer_stripped(api_version: int, stripped: dict[str, Any], code: int, frame: bytes) -> bytes:
    """``frame`` (a WriteTxnMarkers response with its size prefix) with the ``stripped``
    partition answered ``code``; an answer that does not decode goes on as it was."""
    try:
        corr, body = decode_response(WRITE_TXN_MARKERS, api_version, frame[4:])
    except ProtocolError:
        return frame
    # the result classes of this version, beside its response class in kio's schema
    module = importlib.import_module(response_class(WRITE_TXN_MARKERS, api_version).__module__)
    marker_cls = module.WritableTxnMarkerResult
    topic_cls = module.WritableTxnMarkerTopicResult
    partition_cls = module.WritableTxnMarkerPartitionResult
    result = partition_cls(partition_index=stripped["partition"], error_code=ErrorCode(code))
    markers = list(body.markers)
    at = next(
        (i for i, m in enumerate(markers) if int(m.producer_id) == stripped["producer_id"]), None
    )
    if at is None:
        markers.append(marker_cls(producer_id=stripped["producer_id"], topics=()))
        at = len(markers) - 1
    topics = list(markers[at].topics)
    t = next((i for i, tp in enumerate(topics) if tp.name == stripped["topic"]), None)
    if t is None:
        topics.append(topic_cls(name=stripped["topic"], partitions=(result,)))
    else:
        topics[t] = dataclasses.replace(topics[t], partitions=(*topics[t].partitions, result))
    markers[at] = dataclasses.replace(markers[at], topics=tuple(topics))
    return encode_response(corr, dataclasses.replace(body, markers=tuple(markers)))


class StripPartitionRule(FrameRuleBase):
    """Strip one partition (chosen by the rule's seeded RNG) from a matching WriteTxnMarkers
    request before it goes on: the node never sees that partition's marker and answers for
    the others only, or, with ``answer``, for the stripped one with that error too.
    ``api`` defaults to WriteTxnMarkers, the only API it strips."""

    kind: Literal["strip_partition"] = "strip_partition"
    requests_only: ClassVar[bool] = True
    api: list[int] | None = [WRITE_TXN_MARKERS]
    #: the error the answer gives for the stripped partition (an error name); None: the
    #: answer leaves the partition out
    answer: str | None = None

    stage: ClassVar[int] = 5  # after drop_request, before the rules that pass the frame on

    @field_validator("api", mode="after")
    @classmethod
    def _strippable(cls, v: list[int] | None) -> list[int] | None:
        if v is None or any(k not in STRIPPABLE for k in v):
            raise ValueError("strip_partition strips WriteTxnMarkers requests only")
        return v

    @field_validator("answer", mode="after")
    @classmethod
    def _error_name(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            code = ErrorCode[v.lower()]
        except KeyError:
            raise ValueError(f"answer: {v!r} is not a Kafka error name") from None
        if code == ErrorCode.none:
            raise ValueError("answer: give an error (none would say the marker was written)")
        return code.name

    @classmethod
    async def on_request(cls, states: list[RuleState], request: Request) -> bool:
        try:
            header, body = decode_request(request.frame[4:])
        except ProtocolError:
            return False  # not decodable: it goes on untouched
        out = strip_one(body, states[0].rng)
        if out is None:
            return False
        new_body, stripped = out
        request.frame = encode_request(header.correlation_id, new_body, header.client_id)
        answer = states[0].rule.answer
        if answer is not None and request.info is not None:
            request.info.answer_patch = functools.partial(
                answer_stripped, request.info.api_version, stripped, int(ErrorCode[answer])
            )
        request.record("strip_partition", {**states[0].rule.params(), **stripped})
        return False
