"""Rewriting broker addresses in responses, so that clients only ever reach proxies.

For an external cluster (one the harness did not start, so it cannot tell its nodes
to advertise proxy addresses) the client-side proxies rewrite every broker address a
client can learn: Metadata (v0-13) ``brokers``, FindCoordinator v0-3 top-level
``node_id/host/port`` and v4+ ``coordinators`` list, and DescribeCluster (v0-2)
``brokers``. Each (node id, host, port) is mapped through ``resolve`` to the address
of its own proxy (created on demand by the fleet).

Responses carry only a correlation id, so the link remembers the api key and version
of each in-flight rewritable request by correlation id (see ``link.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from txnchaos.cluster.protocol.codec import ProtocolError, decode_response, encode_response

from .apis import DESCRIBE_CLUSTER, FIND_COORDINATOR, METADATA

REWRITE_APIS = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})

Resolve = Callable[[int, str, int], Awaitable[tuple[str, int]]]
"""``resolve(node_id, host, port) -> (proxy_host, proxy_port)``."""


async def _map_brokers(brokers: tuple[Any, ...], id_field: str, resolve: Resolve) -> tuple:
    out = []
    for b in brokers:
        host, port = await resolve(int(getattr(b, id_field)), b.host, int(b.port))
        out.append(dataclasses.replace(b, host=host, port=type(b.port)(port)))
    return tuple(out)


async def rewrite_body(api_key: int, body: Any, resolve: Resolve) -> Any:
    """Return ``body`` with every broker address replaced by ``resolve``'s answer."""
    if api_key in (METADATA, DESCRIBE_CLUSTER):
        id_field = "node_id" if api_key == METADATA else "broker_id"
        return dataclasses.replace(
            body, brokers=await _map_brokers(body.brokers, id_field, resolve)
        )
    if api_key == FIND_COORDINATOR:
        if hasattr(body, "coordinators"):
            coords = []
            for c in body.coordinators:
                if int(c.node_id) >= 0 and c.host:
                    host, port = await resolve(int(c.node_id), c.host, int(c.port))
                    c = dataclasses.replace(c, host=host, port=type(c.port)(port))
                coords.append(c)
            return dataclasses.replace(body, coordinators=tuple(coords))
        if int(body.node_id) >= 0 and body.host:
            host, port = await resolve(int(body.node_id), body.host, int(body.port))
            return dataclasses.replace(body, host=host, port=type(body.port)(port))
        return body
    return body


async def rewrite_response(api_key: int, api_version: int, frame: bytes, resolve: Resolve) -> bytes:
    """Rewrite one response frame (size prefix included); undecodable frames pass as is."""
    try:
        correlation_id, body = decode_response(api_key, api_version, frame[4:])
    except ProtocolError:
        return frame
    new_body = await rewrite_body(api_key, body, resolve)
    if new_body is body:
        return frame
    return encode_response(correlation_id, new_body)
