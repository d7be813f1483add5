"""What the fuzzer learns from the cluster before it starts: which APIs and versions each
node serves (its ApiVersions answer) and a topic seeds can name (created if missing)."""

from __future__ import annotations

import asyncio
import uuid

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import decode_response, encode_request, request_class
from .seeds import FUZZ_TOPIC, Plausible
from .target import Connection, Node

CREATE_TOPICS = 19
TOPIC_PARTITIONS = 3


async def _ask(node: Node, api_key: int, version: int, body: dict[str, object]) -> object:
    conn = await Connection.open(node)
    try:
        request = make(request_class(api_key, version), body)
        conn.writer.write(encode_request(1, request, "txnchaos-fuzz"))
        _, response = decode_response(api_key, version, await conn.read_frame())
        return response
    finally:
        conn.close()


async def api_ranges(node: Node) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version, as ``node`` answers ApiVersions."""
    response: object = await _ask(
        node, 18, 3, {"client_software_name": "txnchaos-fuzz", "client_software_version": "1.0"}
    )
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]


async def plausible_values(
    nodes: list[Node], ranges: list[dict[int, tuple[int, int]]], timeout: float = 30.0
) -> Plausible:
    """Create the fuzz topic (on a node that serves CreateTopics) unless it exists, and
    learn its topic id from a broker's Metadata."""
    creator = next((n for n, r in zip(nodes, ranges, strict=True) if CREATE_TOPICS in r), None)
    if creator is not None:
        await asyncio.wait_for(
            _ask(
                creator,
                CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": FUZZ_TOPIC,
                            "num_partitions": TOPIC_PARTITIONS,
                            "replication_factor": 1,
                        }
                    ],
                    "timeout": 10_000,
                },
            ),
            timeout,
        )
    broker = next(n for n, r in zip(nodes, ranges, strict=True) if 0 in r)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        response: object = await _ask(broker, 3, 12, {"topics": [{"name": FUZZ_TOPIC}]})
        topic = response.topics[0]  # type: ignore[attr-defined]
        if topic.error_code == 0 and topic.partitions:
            return Plausible(topic_id=topic.topic_id or uuid.UUID(int=0))
        if asyncio.get_running_loop().time() > deadline:
            return Plausible()  # seeds then name a topic the node does not have
        await asyncio.sleep(0.1)


INIT_PRODUCER_ID = 22


async def learn_producers(
    nodes: list[Node], ranges: list[dict[int, tuple[int, int]]], plausible: Plausible
) -> tuple[tuple[int, int], ...]:
    """Producers (id, epoch) the cluster really issued, for typed cases to name other
    producers with: two idempotent ones and the seeds' transactional id's. Best effort:
    a node that refuses gives none."""
    out: list[tuple[int, int]] = []
    node = next((n for n, r in zip(nodes, ranges, strict=True) if INIT_PRODUCER_ID in r), None)
    if node is None:
        return ()
    for txn_id in (None, None, plausible.transactional_id):
        try:
            response: object = await asyncio.wait_for(
                _ask(
                    node,
                    INIT_PRODUCER_ID,
                    4,
                    {
                        "transactional_id": txn_id,
                        "transaction_timeout": 60_000,
                        "producer_id": -1,
                        "producer_epoch": -1,
                    },
                ),
                10,
            )
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            continue
        if response.error_code == 0:  # type: ignore[attr-defined]
            out.append((response.producer_id, response.producer_epoch))  # type: ignore[attr-defined]
    return tuple(out)


__all__ = ["api_ranges", "learn_producers", "plausible_values"]
