"""The proxy mesh the local and docker launchers put around the nodes they run.

Links (each a :class:`~txnchaos.harness.faults.proxy.link.LinkProxy` of one fleet):

* ``client->n<B>`` for every node B: B advertises this proxy's address, so every client
  connection to B (bootstrap, then whatever Metadata/FindCoordinator names) passes it;
* ``n<A>->n<B>`` for every ordered pair A != B: A reaches B through it (``--peer
  B=...``; for the controller's node also ``--controller``). Today that carries the
  brokers' controller traffic (registration, heartbeats, Metadata pulls, CreateTopics
  forwarding, producer-id blocks); coordinator-to-broker traffic (WriteTxnMarkers) uses
  the same links as it arrives.

The mesh is made before any node starts (every proxy's port is then known and goes into
the node's command line) with no upstream; :meth:`ProxyMesh.point` sets the upstreams of
every link leading to a node once the node's real address is known, and again whenever
it changes (a restarted container gets a new published port).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..faults.proxy.link import LinkProxy
from ..faults.proxy.thread import FleetThread
from .base import link_name

Address = tuple[str, int]


class ProxyMesh:
    def __init__(
        self,
        node_ids: Iterable[int],
        run_dir: Path,
        *,
        seed: int | str | None = None,
        node_to_node: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        self.node_ids = list(node_ids)
        self.fleet = FleetThread(fault_log=run_dir, seed=seed)
        try:
            # Where the proxies listen: 127.0.0.1 for local nodes; the docker network's
            # gateway for containers (reachable from the host and from the containers).
            self.fleet.fleet.host = host
            self.to_node: dict[int, list[LinkProxy]] = {n: [] for n in self.node_ids}
            self.client: dict[int, LinkProxy] = {}
            self.peer: dict[tuple[int, int], LinkProxy] = {}
            # Listening addresses never change; kept so they outlive the fleet's close.
            self.addresses: dict[str, Address] = {}
            for b in self.node_ids:
                link = self.fleet.add_link(link_name("client", b), None)
                self.client[b] = link
                self.to_node[b].append(link)
                self.addresses[link.name] = link.address
            if node_to_node:
                for a in self.node_ids:
                    for b in self.node_ids:
                        if a != b:
                            link = self.fleet.add_link(link_name(a, b), None)
                            self.peer[(a, b)] = link
                            self.to_node[b].append(link)
                            self.addresses[link.name] = link.address
        except BaseException:
            self.fleet.close()
            raise

    def advertised(self, node_id: int) -> Address:
        """The address node ``node_id`` advertises to clients (its ``client->`` proxy)."""
        return self.addresses[link_name("client", node_id)]

    def peer_address(self, source: int, target: int) -> Address:
        return self.addresses[link_name(source, target)]

    def peers_of(self, source: int) -> dict[int, Address]:
        return {b: self.peer_address(a, b) for (a, b) in self.peer if a == source}

    def point(self, node_id: int, host: str, port: int) -> None:
        """(Re)point every link leading to ``node_id`` at ``host:port``."""
        for link in self.to_node[node_id]:
            if link.upstream != (host, port):
                self.fleet.call(link.set_upstream, host, port)

    def bootstrap(self, node_ids: Iterable[int]) -> str:
        return ",".join("{}:{}".format(*self.advertised(n)) for n in node_ids)
