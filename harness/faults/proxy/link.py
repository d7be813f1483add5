"""One proxied link: a listener forwarding to one upstream, and its connection pairs.

Each accepted client connection gets an upstream connection and two pumps:
requests (client -> upstream) and responses (upstream -> client). A pump reads large
chunks and runs them through a :class:`FrameSplitter`:

* no rule on the link, no rewriting: every frame is PASSed; bytes go out in the
  slices they came in (only frame sizes are read, to know where frames end);
* rewriting on (external cluster): request heads are read to remember the api
  key/version of Metadata/FindCoordinator/DescribeCluster requests by correlation id;
  only those responses are captured, decoded and re-encoded;
* frame rules on the link: every frame is captured whole and matched against the
  rules; the body is decoded only if a rule selects by transactional id/producer id.

Ordering. Whole frames are written with a single ``write`` call and a pump that is
streaming a PASSed frame defers other writers (timers, other connections) until that
frame is complete, so bytes of two frames are never interleaved. When requests are
inspected, the client's order of requests that expect a response is recorded; if
faults make responses come back in another order (non-head-of-line delay, reorder),
responses are held and returned to the client in request order. Dropped requests,
dropped responses and acks=0 Produce requests leave that order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .apis import NO_TARGETS, PRODUCE, Targets, api_name, produce_acks, request_targets
from .framing import REQUEST_HEAD, RESPONSE_HEAD, Action
from .pump import Pump, Side
from .rewrite import REWRITE_APIS, Resolve, rewrite_response
from .rules import NO_FAULTS, LinkPolicy, RuleState

if TYPE_CHECKING:
    from .server import ProxyFleet

log = logging.getLogger(__name__)

_REQ_PREFIX = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
PRIVATE_CORRELATION_BASE = -(2**30)
"""Duplicates get negative correlation ids (clients use non-negative ones)."""


@dataclass
class LinkStats:
    connections_total: int = 0
    connections_active: int = 0
    connections_refused: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    frames_captured_up: int = 0
    frames_captured_down: int = 0
    rewrites: int = 0


class OpenFault:
    """A fault being applied to one frame; written to the fault log when closed."""

    __slots__ = ("closed", "fleet", "kind", "link", "params", "start", "target")

    def __init__(
        self,
        fleet: ProxyFleet,
        kind: str,
        link: str,
        target: dict[str, Any],
        params: dict[str, Any],
    ) -> None:
        self.fleet = fleet
        self.kind = kind
        self.link = link
        self.target = target
        self.params = params
        self.start = time.time()
        self.closed = False

    def close(self, **extra: Any) -> None:
        if self.closed:
            return
        self.closed = True
        if extra:
            self.params = {**self.params, **extra}
        self.fleet.record_fault(
            self.kind, self.start, time.time(), self.link, self.target, self.params
        )


@dataclass(slots=True)
class Inflight:
    """What the response pump needs to know about a forwarded request."""

    api_key: int
    api_version: int
    targets: Targets | None = None
    rewrite: bool = False
    swallow: OpenFault | None = None  # drop_response
    private: OpenFault | None = None  # a duplicate's copy: swallow the response


@dataclass(eq=False)
class HeldFrame:
    """A request held by a reorder rule."""

    conn: ProxiedConnection
    frame: bytes
    duplicates: int
    fault: OpenFault
    dup_target: dict[str, Any]
    dup_params: dict[str, Any]
    timer: asyncio.TimerHandle | None = None
    released: bool = False


class LinkProxy:
    """Listens on 127.0.0.1:<port> and forwards every connection to ``upstream``."""

    def __init__(
        self,
        fleet: ProxyFleet,
        name: str,
        upstream: tuple[str, int] | None,
        *,
        resolve: Resolve | None = None,
    ) -> None:
        self.fleet = fleet
        self.name = name
        self.upstream = upstream
        self.resolve = resolve  # set: rewrite broker addresses in responses
        self.stats = LinkStats()
        self.connections: set[ProxiedConnection] = set()
        self._server: asyncio.Server | None = None
        self._policy = NO_FAULTS
        self._policy_version = -1
        self._upstream_set = asyncio.Event()
        if upstream is not None:
            self._upstream_set.set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> LinkProxy:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Side(_Accepted(self), "client"), host, port)
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None, "link not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    @property
    def bootstrap(self) -> str:
        host, port = self.address
        return f"{host}:{port}"

    def set_upstream(self, host: str, port: int) -> None:
        """(Re)point the link; existing connections keep their upstream."""
        self.upstream = (host, port)
        self._upstream_set.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    # ------------------------------------------------------------------ policy

    def policy(self) -> LinkPolicy:
        version = self.fleet.rules_version
        if version != self._policy_version:
            self._policy = self.fleet.policy_for(self.name)
            self._policy_version = version
        return self._policy

    def refresh(self) -> None:
        """Called by the fleet after rules changed: apply link-level state changes."""
        if self.policy().reset:
            for conn in list(self.connections):
                conn.reset()

    async def connect_upstream(self, conn: ProxiedConnection) -> None:
        """Open the upstream side of a freshly accepted connection."""
        try:
            if not self._upstream_set.is_set():
                await asyncio.wait_for(self._upstream_set.wait(), 30)
            assert self.upstream is not None
            loop = asyncio.get_running_loop()
            await loop.create_connection(lambda: Side(conn, "upstream"), *self.upstream)
        except (OSError, TimeoutError) as exc:
            log.debug("link %s: upstream %s unreachable: %s", self.name, self.upstream, exc)
            conn.reset()


class _Accepted:
    """Owner of a just-accepted client socket until its connection object exists."""

    def __init__(self, link: LinkProxy) -> None:
        self.link = link
        self.conn: ProxiedConnection | None = None

    def side_made(self, which: str, transport: Any) -> Pump | None:
        link = self.link
        if link.policy().reset:
            link.stats.connections_refused += 1
            _rst(transport)
            return None
        transport.pause_reading()
        conn = self.conn = ProxiedConnection(link, transport)
        task = asyncio.ensure_future(link.connect_upstream(conn))
        link._tasks.add(task)
        task.add_done_callback(link._tasks.discard)
        return conn.requests

    def side_lost(self, which: str, exc: BaseException | None) -> None:
        if self.conn is not None:
            self.conn.side_lost(which, exc)

    def side_pause_writing(self, which: str) -> None:
        if self.conn is not None:
            self.conn.side_pause_writing(which)

    def side_resume_writing(self, which: str) -> None:
        if self.conn is not None:
            self.conn.side_resume_writing(which)


def _rst(transport: Any) -> None:
    """Close with a TCP RST (SO_LINGER 0) rather than a FIN."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class ProxiedConnection:
    """One client connection and its upstream connection."""

    def __init__(self, link: LinkProxy, client: asyncio.Transport) -> None:
        self.link = link
        self.fleet = link.fleet
        self.client = client
        self.upstream: asyncio.Transport | None = None
        self.peer = client.get_extra_info("peername")
        self.inflight: dict[int, Inflight] = {}
        self.order: deque[int] = deque()  # correlation ids in client order, awaiting response
        self.order_set: set[int] = set()
        self.held_responses: dict[int, bytes] = {}
        self.pending_out = 0  # requests delayed/held, to be written later by timers
        self._private = PRIVATE_CORRELATION_BASE
        self.requests = Pump(
            REQUEST_HEAD,
            self._decide_request,
            self._on_request,
            lambda: self.link.policy().throttle_request,
            None,
            self._failed,
            link.stats,
            up=True,
        )
        self.responses = Pump(
            RESPONSE_HEAD,
            self._decide_response,
            self._on_response,
            lambda: self.link.policy().throttle_response,
            self._after_response_chunk,
            self._failed,
            link.stats,
            up=False,
        )
        self.requests.src = client
        self.responses.dst = client
        self._open_faults: set[OpenFault] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._held: list[HeldFrame] = []
        self._forget_later: list[int] = []
        self.closed = False
        self._counted = False

    # ------------------------------------------------------------------ socket events

    def side_made(self, which: str, transport: Any) -> Pump | None:
        if self.closed:
            transport.abort()
            return None
        self.upstream = transport
        self.requests.dst = transport
        self.responses.src = transport
        self.link.stats.connections_total += 1
        self.link.stats.connections_active += 1
        self.link.connections.add(self)
        self._counted = True
        self.requests.connected()
        self.client.resume_reading()
        return self.responses

    def side_lost(self, which: str, exc: BaseException | None) -> None:
        self.close()

    def side_pause_writing(self, which: str) -> None:
        (self.responses if which == "client" else self.requests).pause("backpressure")

    def side_resume_writing(self, which: str) -> None:
        (self.responses if which == "client" else self.requests).resume("backpressure")

    def _failed(self, exc: BaseException) -> None:
        self.abort()

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Either side went away: close the other (flushing what it still has to send)."""
        if self.closed:
            return
        self.closed = True
        self.requests.close()
        self.responses.close()
        for t in list(self._tasks):
            t.cancel()
        for transport in (self.client, self.upstream):
            if transport is not None and not transport.is_closing():
                transport.close()
        if self._counted:
            self._counted = False
            self.link.connections.discard(self)
            self.link.stats.connections_active -= 1
        self._teardown()

    def _teardown(self) -> None:
        for held in self._held:
            if not held.released:
                held.released = True
                if held.timer is not None:
                    held.timer.cancel()
                self._held_owner_remove(held)
                held.fault.close(outcome="connection closed")
        self._held.clear()
        for fault in list(self._open_faults):
            fault.close(outcome="connection closed")
        self._open_faults.clear()

    def _held_owner_remove(self, held: HeldFrame) -> None:
        for st in self.fleet.rule_states():
            if held in st.held:
                st.held.remove(held)

    def abort(self) -> None:
        for transport in (self.client, self.upstream):
            if transport is not None:
                transport.abort()
        self.close()

    def reset(self) -> None:
        """Link partition: RST both sides."""
        _rst(self.client)
        _rst(self.upstream)
        self.close()

    # ------------------------------------------------------------------ writing

    def write_up(self, frame: bytes) -> None:
        """Write one whole request frame upstream (deferred if a PASS frame is mid-way)."""
        if not self.closed:
            self.requests.write_frame(frame)

    def write_down(self, frame: bytes) -> None:
        if not self.closed:
            self.responses.write_frame(frame)

    def _track(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ requests

    def _decide_request(self, buf: bytes | bytearray | memoryview, off: int, size: int) -> Action:
        policy = self.link.policy()
        if policy.blackhole_request:
            return Action.DISCARD
        if policy.inspect_requests or self.pending_out:
            return Action.CAPTURE
        if self.link.resolve is not None and size >= REQUEST_HEAD:
            api_key, version, corr = _REQ_PREFIX.unpack_from(buf, off + 4)
            if api_key in REWRITE_APIS:
                self.inflight[corr] = Inflight(api_key, version, rewrite=True)
        return Action.PASS

    def _target(self, api_key: int, version: int, corr: int, targets: Targets | None) -> dict:
        target: dict[str, Any] = {
            "api": api_name(api_key),
            "api_key": api_key,
            "api_version": version,
            "correlation_id": corr,
        }
        if targets is not None:
            if targets.transactional_ids:
                target["transactional_ids"] = list(targets.transactional_ids)
            if targets.producer_ids:
                target["producer_ids"] = list(targets.producer_ids)
        return target

    def _open(self, kind: str, target: dict, params: dict) -> OpenFault:
        fault = OpenFault(self.fleet, kind, self.link.name, target, params)
        self._open_faults.add(fault)
        return fault

    def _close(self, fault: OpenFault, **extra: Any) -> None:
        self._open_faults.discard(fault)
        fault.close(**extra)

    async def _on_request(self, frame: bytes) -> None:
        self.link.stats.frames_captured_up += 1
        api_key, version, corr = _REQ_PREFIX.unpack_from(frame, 4)
        policy = self.link.policy()
        if policy.blackhole_request:
            return
        now = time.time()
        cache: list[Targets] = []

        def targets() -> Targets:
            if not cache:
                cache.append(request_targets(api_key, frame))
            return cache[0]

        applying: list[RuleState] = []
        triggers: list[RuleState] = []
        for st in policy.request_rules:
            if st.kind == "reorder" and st.held and st.rule.filters_match(api_key, targets):
                triggers.append(st)
            if st.decide(api_key, targets, now):
                applying.append(st)

        known = cache[0] if cache else None
        if known is None and (policy.request_targets or policy.response_targets) and applying:
            known = targets()
        target = self._target(api_key, version, corr, known)
        target["direction"] = "request"

        drop = next((s for s in applying if s.kind == "drop_request"), None)
        if drop is not None:
            self.fleet.record_fault(
                "drop_request", now, now, self.link.name, target, drop.rule.params()
            )
            return

        expects_response = api_key != PRODUCE or produce_acks(frame, version) != 0
        if expects_response:
            info = Inflight(api_key, version)
            if self.link.resolve is not None and api_key in REWRITE_APIS:
                info.rewrite = True
            if policy.response_targets:
                info.targets = targets()
            swallow = next((s for s in applying if s.kind == "drop_response"), None)
            if swallow is not None:
                info.swallow = self._open("drop_response", target, swallow.rule.params())
            self.inflight[corr] = info
            self.order.append(corr)
            self.order_set.add(corr)

        duplicates = sum(s.rule.copies for s in applying if s.kind == "duplicate")
        if duplicates:
            dup = next(s for s in applying if s.kind == "duplicate")
            dup_target = target
            dup_params = dup.rule.params()
        else:
            dup_target, dup_params = {}, {}

        reorder = next((s for s in applying if s.kind == "reorder"), None)
        if reorder is not None:
            self._hold(reorder, frame, target, duplicates, dup_params)
            return

        delays = [s for s in applying if s.kind == "delay"]
        if delays:
            ms = sum(s.rule.draw_ms(s.rng) for s in delays)
            fault = self._open(
                "delay", target, {**delays[0].rule.params(), "applied_ms": round(ms, 3)}
            )
            if all(s.rule.head_of_line for s in delays):
                await _sleep_unless_removed(ms / 1000.0, delays)
                self._close(fault)
                self._send(frame, duplicates, dup_target, dup_params)
                self._release(triggers)
            else:
                self.pending_out += 1
                self._track(
                    self._delayed_send(
                        ms, delays, fault, frame, duplicates, dup_target, dup_params, triggers
                    )
                )
            return

        self._send(frame, duplicates, dup_target, dup_params)
        self._release(triggers)

    async def _delayed_send(
        self,
        ms: float,
        delays: list[RuleState],
        fault: OpenFault,
        frame: bytes,
        duplicates: int,
        dup_target: dict,
        dup_params: dict,
        triggers: list[RuleState],
    ) -> None:
        try:
            await _sleep_unless_removed(ms / 1000.0, delays)
        finally:
            self.pending_out -= 1
        self._close(fault)
        self._send(frame, duplicates, dup_target, dup_params)
        self._release(triggers)

    def _send(self, frame: bytes, duplicates: int, dup_target: dict, dup_params: dict) -> None:
        """Forward a request, then its duplicates under private correlation ids."""
        if self.closed:
            return
        if self.link.policy().blackhole_request:
            corr = _REQ_PREFIX.unpack_from(frame, 4)[2]
            self._forget(corr)
            return
        self.write_up(frame)
        if not duplicates:
            return
        api_key, version, corr = _REQ_PREFIX.unpack_from(frame, 4)
        expects_response = api_key != PRODUCE or produce_acks(frame, version) != 0
        for i in range(duplicates):
            private = self._next_private()
            copy = bytearray(frame)
            _I32.pack_into(copy, 8, private)
            params = {**dup_params, "copy": i + 1, "private_correlation_id": private}
            fault = self._open("duplicate", dup_target, params)
            if expects_response:
                self.inflight[private] = Inflight(api_key, version, private=fault)
            else:
                self._close(fault)
            self.write_up(bytes(copy))

    def _next_private(self) -> int:
        self._private -= 1
        if self._private < -(2**31) + 1:
            self._private = PRIVATE_CORRELATION_BASE
        return self._private

    # ------------------------------------------------------------------ reorder

    def _hold(
        self, st: RuleState, frame: bytes, target: dict, duplicates: int, dup_params: dict
    ) -> None:
        fault = self._open("reorder", target, st.rule.params())
        held = HeldFrame(self, frame, duplicates, fault, target, dup_params)
        self.pending_out += 1
        st.held.append(held)
        self._held.append(held)
        loop = asyncio.get_running_loop()
        held.timer = loop.call_later(
            st.rule.max_hold_ms / 1000.0, _release_one, st, held, "max_hold"
        )

    @staticmethod
    def _release(triggers: list[RuleState]) -> None:
        for st in triggers:
            for held in list(st.held):
                _release_one(st, held, "later request passed")

    # ------------------------------------------------------------------ responses

    def _decide_response(self, buf: bytes | bytearray | memoryview, off: int, size: int) -> Action:
        policy = self.link.policy()
        if policy.blackhole_response:
            if size >= RESPONSE_HEAD and (self.order_set or self.inflight):
                # forgotten once this chunk's earlier frames have been written
                self._forget_later.append(_I32.unpack_from(buf, off + 4)[0])
            return Action.DISCARD
        if policy.inspect_responses or self.order_set:
            return Action.CAPTURE
        if (
            self.inflight
            and size >= RESPONSE_HEAD
            and _I32.unpack_from(buf, off + 4)[0] in self.inflight
        ):
            return Action.CAPTURE
        return Action.PASS

    def _after_response_chunk(self) -> None:
        if self._forget_later:
            corrs, self._forget_later = self._forget_later, []
            for corr in corrs:
                self._forget(corr)

    async def _on_response(self, frame: bytes) -> None:
        self.link.stats.frames_captured_down += 1
        corr = _I32.unpack_from(frame, 4)[0]
        info = self.inflight.pop(corr, None)
        if info is not None:
            if info.private is not None:
                self._close(info.private, outcome="duplicate response swallowed")
                return
            if info.swallow is not None:
                self._close(info.swallow)
                self._forget(corr)
                return
            if info.rewrite and self.link.resolve is not None:
                new = await rewrite_response(
                    info.api_key, info.api_version, frame, self.link.resolve
                )
                if new is not frame:
                    self.link.stats.rewrites += 1
                    frame = new
        policy = self.link.policy()
        if policy.response_rules and info is not None:
            now = time.time()
            api_key = info.api_key
            tg = info.targets or NO_TARGETS
            delays = [st for st in policy.response_rules if st.decide(api_key, lambda: tg, now)]
            if delays:
                ms = sum(s.rule.draw_ms(s.rng) for s in delays)
                target = self._target(api_key, info.api_version, corr, info.targets)
                target["direction"] = "response"
                fault = self._open(
                    "delay", target, {**delays[0].rule.params(), "applied_ms": round(ms, 3)}
                )
                await _sleep_unless_removed(ms / 1000.0, delays)
                self._close(fault)
        self._deliver(corr, frame)

    def _deliver(self, corr: int, frame: bytes) -> None:
        """Return a response to the client, in the client's request order."""
        if corr not in self.order_set:
            self.write_down(frame)
            return
        if self.order[0] != corr:
            self.held_responses[corr] = frame
            return
        self.order.popleft()
        self.order_set.discard(corr)
        self.write_down(frame)
        self._flush_held_responses()

    def _flush_held_responses(self) -> None:
        while self.order and self.order[0] in self.held_responses:
            c = self.order.popleft()
            self.order_set.discard(c)
            self.write_down(self.held_responses.pop(c))

    def _forget(self, corr: int) -> None:
        """A request that will get no response to the client (dropped on the way)."""
        self.inflight.pop(corr, None)
        if corr in self.order_set:
            self.order_set.discard(corr)
            self.order.remove(corr)
            self._flush_held_responses()


def _release_one(st: RuleState, held: HeldFrame, why: str) -> None:
    if held.released:
        return
    held.released = True
    if held.timer is not None:
        held.timer.cancel()
    with contextlib.suppress(ValueError):
        st.held.remove(held)
    conn = held.conn
    with contextlib.suppress(ValueError):
        conn._held.remove(held)
    conn.pending_out -= 1
    conn._close(held.fault, released=why)
    conn._send(held.frame, held.duplicates, held.dup_target, held.dup_params)


def release_all(st: RuleState, why: str = "rule removed") -> None:
    for held in list(st.held):
        _release_one(st, held, why)


async def _sleep_unless_removed(seconds: float, states: list[RuleState]) -> None:
    """Sleep, but wake up early if one of the rules is removed (healed)."""
    if seconds <= 0:
        return
    if any(st.removed.is_set() for st in states):
        return
    waits = [asyncio.ensure_future(st.removed.wait()) for st in states]
    try:
        await asyncio.wait(waits, timeout=seconds)
    finally:
        for w in waits:
            w.cancel()
