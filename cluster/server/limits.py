"""What one node lets its clients hold: connections, queued requests, request memory.

Kafka's names and meanings where Kafka has them:

* ``max.connections`` / ``max.connections.per.ip``: a connection over either limit
  is closed as soon as it is accepted (Kafka's acceptor refuses it the same way for
  the per-IP limit).
* ``queued.max.requests``: complete requests received and not yet started, over all
  connections; past it the node stops reading from a connection that queues more
  until the queue drains or that connection's own requests have all started (frames
  stuck behind another client's long wait must not stop everyone else). A connection
  not being read is closed once its client has closed it (``server.peer_gone``).
* ``queued.max.request.bytes``: memory for requests larger than a connection's
  receive buffer. A connection whose next frame claims more must reserve the
  claimed size here first (all or nothing, first come first served) and stops
  reading until it can; the memory itself is allocated only as bytes arrive
  (``protocol.framing``), so a claim with no data behind it costs no memory, and
  since a reservation is whole a request that got one can always complete.
* ``connections.max.idle.ms``: a connection that sends nothing for this long is
  closed (so a client that claims a large frame and stalls gives its reservation
  back).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 1000
    max_connections_per_ip: int = 2_147_483_647
    queued_max_requests: int = 500
    queued_max_request_bytes: int = 256 * 1024 * 1024
    connections_max_idle_ms: int = 600_000

    def __post_init__(self) -> None:
        for name in (
            "max_connections",
            "max_connections_per_ip",
            "queued_max_requests",
            "queued_max_request_bytes",
            "connections_max_idle_ms",
        ):
            if getattr(self, name) < 1:
                key = name.replace("_", ".")
                raise ValueError(f"{key} must be at least 1, got {getattr(self, name)}")


class RequestMemory:
    """``queued.max.request.bytes`` as reservations: granted whole, in arrival order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self._waiting: collections.OrderedDict[int, tuple[int, Callable[[], None]]] = (
            collections.OrderedDict()
        )

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def try_reserve(self, owner: int, size: int, granted: Callable[[], None]) -> bool:
        """Reserve ``size`` bytes now (True), or queue ``owner`` and call ``granted``
        once they are reserved for it (False). Nobody jumps the queue."""
        if size > self.capacity:
            raise ValueError(f"a reservation of {size} bytes exceeds the pool of {self.capacity}")
        if not self._waiting and self.reserved + size <= self.capacity:
            self.reserved += size
            return True
        self._waiting[owner] = (size, granted)
        return False

    def release(self, size: int) -> None:
        self.reserved -= size
        assert self.reserved >= 0, "released more than was reserved"
        self._grant()

    def forget(self, owner: int) -> None:
        """``owner`` no longer waits (its connection closed)."""
        if self._waiting.pop(owner, None) is not None:
            self._grant()

    def _grant(self) -> None:
        while self._waiting:
            owner, (size, granted) = next(iter(self._waiting.items()))
            if self.reserved + size > self.capacity:
                return
            del self._waiting[owner]
            self.reserved += size
            granted()


class RequestQueue:
    """``queued.max.requests`` over all connections: frames received, not yet started.
    Connections that were stopped for it are resumed, oldest first, as it drains."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.queued = 0
        self._stopped: collections.OrderedDict[int, Callable[[], None]] = collections.OrderedDict()

    @property
    def full(self) -> bool:
        return self.queued >= self.capacity

    def stop(self, owner: int, resume: Callable[[], None]) -> None:
        self._stopped[owner] = resume

    def forget(self, owner: int) -> None:
        self._stopped.pop(owner, None)

    def add(self, count: int) -> None:
        self.queued += count

    def remove(self, count: int) -> None:
        self.queued -= count
        while self._stopped and not self.full:
            _, resume = self._stopped.popitem(last=False)
            resume()


__all__ = ["ConnectionLimits", "RequestMemory", "RequestQueue"]
