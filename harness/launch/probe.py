"""Asking a Kafka node, over the wire, whether it serves: one request per connection,
blocking, with a timeout (the launcher's readiness checks)."""

from __future__ import annotations

import socket
import struct
from typing import Any

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import ProtocolError, decode_response, encode_request, request_class

METADATA = 3
FIND_COORDINATOR = 10
API_VERSIONS = 18
METADATA_VERSION = 9  # Kafka >= 2.4 (and every 3.x/4.x release)
API_VERSIONS_VERSION = 3


def _exchange(
    address: tuple[str, int], api_key: int, version: int, request: Any, timeout: float
) -> Any:
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(encode_request(1, request, "txnchaos-launcher"))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        return decode_response(api_key, version, _recv(sock, size))[1]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def brokers_seen(address: tuple[str, int], timeout: float = 5.0) -> set[int] | None:
    """The ids of the brokers a Metadata request to ``address`` lists (None: no answer)."""
    request = make(
        request_class(METADATA, METADATA_VERSION),
        topics=[],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    try:
        body = _exchange(address, METADATA, METADATA_VERSION, request, timeout)
    except (OSError, ValueError, ProtocolError, struct.error):
        return None
    return {int(b.node_id) for b in body.brokers}


def answers(address: tuple[str, int], timeout: float = 5.0) -> bool:
    """Whether ``address`` answers an ApiVersions request (any Kafka listener does)."""
    return api_versions(address, timeout) is not None


def api_versions(address: tuple[str, int], timeout: float = 5.0) -> Any | None:
    request = make(
        request_class(API_VERSIONS, API_VERSIONS_VERSION),
        client_software_name="txnchaos",
        client_software_version="1",
    )
    try:
        return _exchange(address, API_VERSIONS, API_VERSIONS_VERSION, request, timeout)
    except (OSError, ValueError, ProtocolError, struct.error):
        return None


def finalized_features(address: tuple[str, int], timeout: float = 5.0) -> dict[str, int] | None:
    """The finalized feature levels a node reports (None: no answer)."""
    body = api_versions(address, timeout)
    if body is None:
        return None
    return {f.name: int(f.max_version_level) for f in body.finalized_features}


def find_coordinator(
    address: tuple[str, int], key: str, key_type: int, timeout: float = 5.0
) -> int | None:
    """The error code of a FindCoordinator (v1; ``key_type`` 0: group, 1: transaction) for
    ``key`` asked of ``address`` (None: no answer). On Apache Kafka the first one of each
    kind creates its internal topic (__consumer_offsets, __transaction_state)."""
    request = make(request_class(FIND_COORDINATOR, 1), key=key, key_type=key_type)
    try:
        body = _exchange(address, FIND_COORDINATOR, 1, request, timeout)
    except (OSError, ValueError, ProtocolError, struct.error):
        return None
    return int(body.error_code)
