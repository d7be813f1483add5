"""Connections to the nodes of a cluster, with API versions negotiated per node.

A :class:`NodeConnection` is the cluster's own pipelined asyncio connection
(``cluster/net/client.PeerConnection``) plus what its ApiVersions (v3) answer said: the
version range of every API, and the supported and finalized features (KIP-584), where the
``transaction.version`` feature lives. Requests are described as plain dicts and built for
the version both sides support (``cluster/protocol/build.make``), or sent as a prebuilt kio
entity (held requests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...cluster.net.client import PeerAuthenticationFailed, PeerConnection, PeerUnavailable
from ...cluster.protocol.build import make
from ...cluster.protocol.codec import ProtocolError, request_class
from ...cluster.security.sasl import SaslCredentials
from .errors import (
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_VERSION,
    FatalError,
    RetriableError,
    UnsupportedError,
)

API_PRODUCE = 0
API_METADATA = 3
API_FIND_COORDINATOR = 10
API_VERSIONS = 18
API_INIT_PRODUCER_ID = 22
API_ADD_PARTITIONS = 24
API_ADD_OFFSETS = 25
API_END_TXN = 26
API_TXN_OFFSET_COMMIT = 28

#: The versions this client can speak: (lowest, highest). Produce stops at 12 (v13 names
#: topics by id), InitProducerId at 5 (v6 is KIP-939's 2PC), AddPartitionsToTxn at 3
#: (v4+ is broker-to-coordinator only).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    API_PRODUCE: (3, 12),
    API_METADATA: (1, 12),
    API_FIND_COORDINATOR: (1, 4),
    API_VERSIONS: (0, 3),
    API_INIT_PRODUCER_ID: (0, 6),
    API_ADD_PARTITIONS: (0, 3),
    API_ADD_OFFSETS: (0, 4),
    API_END_TXN: (0, 5),
    API_TXN_OFFSET_COMMIT: (0, 5),
}

TRANSACTION_VERSION_FEATURE = "transaction.version"

#: How long a new connection may take to answer its first request (ApiVersions).
SETUP_TIMEOUT_S = 10.0


class ConnectionLost(RetriableError):
    """The node could not be reached or the connection broke mid-request: the request may
    or may not have been processed."""


class AuthenticationError(FatalError):
    """The node refused our SASL credentials: retrying with the same ones cannot help
    (Java's SaslAuthenticationException)."""


@dataclass
class Features:
    """What a node's ApiVersions v3 answer says about features (empty on older versions)."""

    supported: dict[str, tuple[int, int]] = field(default_factory=dict)
    finalized: dict[str, int] = field(default_factory=dict)
    finalized_epoch: int = -1

    def transaction_version(self) -> int:
        """The finalized ``transaction.version`` (0 when the node does not report it)."""
        return self.finalized.get(TRANSACTION_VERSION_FEATURE, 0)


def pick_version(api_key: int, broker: tuple[int, int] | None, cap: int | None = None) -> int:
    """The highest version both sides speak (at most ``cap``); UnsupportedError if none."""
    low, high = CLIENT_VERSIONS[api_key]
    if cap is not None:
        high = min(high, cap)
    if broker is None:
        raise UnsupportedError(f"the node does not serve api key {api_key}", UNSUPPORTED_VERSION)
    version = min(high, broker[1])
    if version < max(low, broker[0]):
        raise UnsupportedError(
            f"no common version of api key {api_key}: client {low}-{high}, "
            f"node {broker[0]}-{broker[1]}",
            UNSUPPORTED_VERSION,
        )
    return version


class NodeConnection:
    """One node: a pipelined connection and its negotiated versions."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        client_id: str,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.peer = PeerConnection(host, port, client_id=client_id, sasl=sasl)
        self.versions: dict[int, tuple[int, int]] = {}
        self.features = Features()
        self._negotiated = False
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"NodeConnection({self.node_id}, {self.host}:{self.port})"

    async def negotiate(self, timeout: float, *, again: bool = False) -> None:
        """ApiVersions (v3, v0 if the node does not understand v3); ``again`` re-reads the
        features on a connection that negotiated before."""
        async with self._lock:
            if self._negotiated and not again:
                return
            try:
                response = await self._raw(
                    make(request_class(API_VERSIONS, 3), {}, **_SOFTWARE), timeout
                )
            except ProtocolError:
                response = await self._raw(make(request_class(API_VERSIONS, 0), {}), timeout)
            if response.error_code != 0 and not response.api_keys:
                raise FatalError(f"ApiVersions refused by {self}", int(response.error_code))
            self.versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
            }
            self.features = Features(
                supported={
                    f.name: (int(f.min_version), int(f.max_version))
                    for f in getattr(response, "supported_features", ())
                },
                finalized={
                    f.name: int(f.max_version_level)
                    for f in getattr(response, "finalized_features", ())
                },
                finalized_epoch=int(getattr(response, "finalized_features_epoch", -1)),
            )
            self._negotiated = True

    def version(self, api_key: int, cap: int | None = None) -> int:
        return pick_version(api_key, self.versions.get(api_key), cap)

    def build(
        self, api_key: int, body: Mapping[str, Any], *, cap: int | None = None, version=None
    ) -> Any:
        """The request entity for ``body`` at the negotiated version (or ``version``)."""
        v = self.version(api_key, cap) if version is None else version
        return make(request_class(api_key, v), body)

    async def send(
        self, api_key: int, body: Mapping[str, Any], timeout: float, *, cap: int | None = None
    ) -> Any:
        """Negotiate if needed, build ``body`` at the best version and await the response."""
        await self._setup(timeout)
        return await self._raw(self.build(api_key, body, cap=cap), timeout)

    async def send_entity(self, entity: Any, timeout: float) -> Any:
        """Send a prebuilt request entity as it is (a held request)."""
        await self._setup(timeout)
        return await self._raw(entity, timeout)

    async def _setup(self, timeout: float) -> None:
        """A new TCP connection starts with ApiVersions, within ``SETUP_TIMEOUT_S`` (as
        Java's socket.connection.setup.timeout.ms and librdkafka's
        api.version.request.timeout.ms): a connection accepted but never served (a proxy
        whose node is down) fails fast instead of holding a request for its whole timeout."""
        if not self._negotiated or not self.peer.connected:
            await self.negotiate(min(timeout, SETUP_TIMEOUT_S), again=True)

    async def _raw(self, entity: Any, timeout: float) -> Any:
        try:
            return await self.peer.request(entity, timeout=timeout)
        except PeerAuthenticationFailed as exc:
            raise AuthenticationError(str(exc), SASL_AUTHENTICATION_FAILED) from exc
        except PeerUnavailable as exc:
            raise ConnectionLost(f"{type(entity).__name__} to {self}: {exc}") from exc

    async def close(self) -> None:
        await self.peer.close()


_SOFTWARE = {"client_software_name": "txnchaos-producer", "client_software_version": "0.1"}


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for part in bootstrap.split(","):
        part = part.strip()
        if not part:
            continue
        host, _, port = part.rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError(f"no address in bootstrap {bootstrap!r}")
    return out
