"""The ``external`` launcher: any Kafka-compatible cluster, given by ``--bootstrap``.

The harness does not run these nodes, so it cannot tell them to advertise proxies.
Instead the fleet's external mode (:meth:`ProxyFleet.external`) puts a proxy in front of
each bootstrap server (``client->bootstrap<i>``) and rewrites every broker address in
Metadata / FindCoordinator / DescribeCluster responses to the address of a proxy of
that broker (``client->node<id>``, made on first sight). Clients therefore only ever
reach proxies, and proxy faults apply to every client connection. At start the launcher
sends one Metadata request through the first bootstrap proxy, so every broker already
has its link (and appears in ``nodes``) before the workload starts.

No node faults (``capabilities`` is empty): kill/pause/restart raise
:class:`~.errors.UnsupportedFault`. Metrics endpoints are unknown unless given
(``ExternalLauncher(metrics={node_id: url})``: ``txnchaos run --metrics-url NODE=URL`` or the
scenario's ``cluster.metrics``). ``ClusterSpec`` sizes and settings are
ignored (the cluster exists); ``proxied`` is always on for the client side, and
node-to-node links are not proxied (the harness cannot reconfigure the nodes).
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...cluster.protocol.codec import ProtocolError
from ..faults.proxy.server import ExternalCluster
from ..faults.proxy.thread import FleetThread
from .base import ClusterHandle, ClusterSpec, NodeInfo
from .errors import LaunchError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
METADATA_VERSION = 12  # Kafka >= 2.8 and the project's nodes


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT...]`` -> addresses; LaunchError on anything else."""
    out = []
    for part in value.split(","):
        part = part.strip()
        host, sep, port = part.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise LaunchError(f"--bootstrap expects HOST:PORT[,HOST:PORT...], got {value!r}")
        out.append((host, int(port)))
    if not out:
        raise LaunchError("--bootstrap is empty")
    return out


class ExternalHandle(ClusterHandle):
    launcher = "external"
    flavour = "external"
    capabilities = frozenset()

    def __init__(
        self,
        run_dir: Path,
        spec: ClusterSpec,
        upstream: str,
        metrics: Mapping[int, str],
    ) -> None:
        super().__init__(run_dir, spec)
        self.upstream = upstream
        self.metrics = dict(metrics)
        self.external: ExternalCluster | None = None
        self._last_nodes: list[NodeInfo] = []
        self._bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        assert self._bootstrap is not None, "not started"
        return self._bootstrap  # the bootstrap proxies never move

    @property
    def nodes(self) -> list[NodeInfo]:
        if self.external is None or self.fleet is None:
            return []
        if self._stopped:  # the fleet is closed; what was known last
            return self._last_nodes
        self._last_nodes = self._current_nodes()
        return self._last_nodes

    def _current_nodes(self) -> list[NodeInfo]:
        assert self.external is not None and self.fleet is not None
        ext = self.external
        seen = self.fleet.call(lambda: list(ext.broker_links.items()))
        nodes: dict[int, NodeInfo] = {}
        for (node_id, host, port), link in seen:
            # A broker that moved (new host/port under the same id): the latest link wins.
            nodes[node_id] = NodeInfo(
                id=node_id,
                role="broker",
                host=host,
                port=port,
                advertised=link.bootstrap,
                metrics_url=self.metrics.get(node_id),
            )
        return [nodes[k] for k in sorted(nodes)]

    def metrics_urls(self) -> dict[int, str]:
        return dict(self.metrics)

    def _stop(self) -> None:
        # Not our cluster: nothing to stop; the fleet closes in stop(). Keep the nodes seen.
        if self.external is not None and self.fleet is not None:
            self._last_nodes = self._current_nodes()

    def _describe_extra(self) -> dict[str, Any]:
        return {"upstream_bootstrap": self.upstream}


class ExternalLauncher:
    name = "external"

    def __init__(self, bootstrap: str, metrics: Mapping[int, str] | None = None) -> None:
        self.addresses = parse_bootstrap(bootstrap)
        self.bootstrap = ",".join(f"{h}:{p}" for h, p in self.addresses)
        self.metrics = dict(metrics or {})

    def start(self, spec: ClusterSpec, run_dir: Path) -> ExternalHandle:
        spec.refuse_cpus(self.name)
        run_dir = run_dir.resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        _check_reachable(self.addresses)
        handle = ExternalHandle(run_dir, spec, self.bootstrap, self.metrics)
        try:
            handle.fleet = FleetThread(fault_log=run_dir, seed=spec.seed)
            handle.external = handle.fleet.external(self.addresses)
            handle._bootstrap = handle.external.bootstrap_servers
            try:
                _discover(handle.external.bootstrap_links[0].address)
            except (OSError, ValueError, ProtocolError) as exc:  # nodes appear as clients go
                log.warning("could not list the brokers of %s: %s", self.bootstrap, exc)
        except BaseException:
            handle.stop()
            raise
        return handle


def _check_reachable(addresses: list[tuple[str, int]]) -> None:
    errors = []
    for address in addresses:
        try:
            with socket.create_connection(address, timeout=CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            errors.append(f"{address[0]}:{address[1]}: {exc}")
    raise LaunchError("no bootstrap server answers: " + "; ".join(errors))


def _discover(proxy: tuple[str, int]) -> None:
    """One Metadata request through a bootstrap proxy: its rewriting makes a link per broker."""
    from ...cluster.protocol.build import make
    from ...cluster.protocol.codec import decode_response, encode_request, request_class

    request = make(
        request_class(3, METADATA_VERSION),
        topics=[],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with socket.create_connection(proxy, timeout=CONNECT_TIMEOUT_S) as sock:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.sendall(encode_request(1, request, "txnchaos-launcher"))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        decode_response(3, METADATA_VERSION, _recv(sock, size))


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed during the Metadata answer")
        buf += chunk
    return buf
