"""``strip_partition``: a WriteTxnMarkers request reaches the node without one of its
partitions, so the node writes no marker there and its answer leaves that partition out.

This is the partial answer a coordinator must not take as success: Kafka's coordinator
finds no result for the partition and treats the response as broken (our nodes retry the
partition). A coordinator that took the missing answer for "written" completes the
transaction with one partition still holding its records in an open transaction: the
partition's LSO stays behind them and a committed transaction's records there are never
read. Stripping only the response would show nothing: the node would have written the
marker anyway.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import field_validator

from txnchaos.cluster.protocol.codec import ProtocolError, decode_request, encode_request

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


class StripPartitionRule(FrameRuleBase):
    """Strip one partition (chosen by the rule's seeded RNG) from a matching WriteTxnMarkers
    request before it goes on: the node never sees that partition's marker and answers for
    the others only. ``api`` defaults to WriteTxnMarkers, the only API it strips."""

    kind: Literal["strip_partition"] = "strip_partition"
    requests_only: ClassVar[bool] = True
    api: list[int] | None = [WRITE_TXN_MARKERS]

    stage: ClassVar[int] = 5  # after drop_request, before the rules that pass the frame on

    @field_validator("api", mode="after")
    @classmethod
    def _strippable(cls, v: list[int] | None) -> list[int] | None:
        if v is None or any(k not in STRIPPABLE for k in v):
            raise ValueError("strip_partition strips WriteTxnMarkers requests only")
        return v

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
        request.record("strip_partition", {**states[0].rule.params(), **stripped})
        return False
