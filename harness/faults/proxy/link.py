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
  The rules that apply to a frame act on it through a :class:`Request` (or
  :class:`Response`): each rule kind's module says what it does (drop, hold, copy,
  wait); the link forwards what they leave it.

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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .apis import NO_TARGETS, PRODUCE, Targets, api_name, produce_acks, request_targets
from .framing import REQUEST_HEAD, RESPONSE_HEAD, Action
from .pump import Pump, Side
from .rewrite import REWRITE_APIS, Resolve, rewrite_response
from .rules import NO_FAULTS, LinkPolicy, RuleState
from .rules.runtime import HeldFrame

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
    swallow: OpenFault | None = None  # the response is not delivered; this fault closes
    swallow_note: dict[str, Any] | None = None  # added to the fault's params when it closes
    #: rewrites the response (frame with its size prefix) before any response rule sees it:
    #: a rule that edited the request makes the answer fit the edit (strip_partition's
    #: ``answer``)
    answer_patch: Callable[[bytes], bytes] | None = None


class ParkedFrame(HeldFrame, Protocol):
    """A held request its connection must settle if it closes first."""

    def abandon(self, outcome: str) -> None: ...


class Request:
    """A request frame on its way upstream: what the rules applying to it act through."""

    __slots__ = ("_after", "api_key", "conn", "corr", "frame", "info", "now", "target", "triggers")

    def __init__(
        self,
        conn: ProxiedConnection,
        frame: bytes,
        api_key: int,
        corr: int,
        now: float,
        target: dict[str, Any],
        info: Inflight | None,
        triggers: tuple[RuleState, ...],
    ) -> None:
        self.conn = conn
        self.frame = frame
        self.api_key = api_key
        self.corr = corr
        self.now = now
        self.target = target
        self.info = info  # None: the client expects no response (acks=0 Produce)
        self.triggers = triggers  # rules whose held frames go once this one is forwarded
        self._after: list[Callable[[Request], None]] = []

    def record(self, kind: str, params: dict[str, Any]) -> None:
        """Log an instant fault on this request."""
        conn = self.conn
        conn.fleet.record_fault(kind, self.now, self.now, conn.link.name, self.target, params)

    def open_fault(self, kind: str, params: dict[str, Any]) -> OpenFault:
        """A fault lasting until :meth:`close_fault` (then logged)."""
        return self.conn._open(kind, self.target, params)

    def close_fault(self, fault: OpenFault, **extra: Any) -> None:
        self.conn._close(fault, **extra)

    def drop(self) -> None:
        """The request is not forwarded: the client gets no response to it."""
        self.conn._forget(self.corr)

    def swallow_response(self, kind: str, params: dict[str, Any]) -> None:
        """Forward the request but do not deliver its response (logged as ``kind``)."""
        if self.info is not None:
            self.info.swallow = self.open_fault(kind, params)

    def park(self, held: ParkedFrame | None = None) -> None:
        """The request will be forwarded later (by a timer or another request)."""
        self.conn.pending_out += 1
        if held is not None:
            self.conn._parked.append(held)

    def unpark(self, held: ParkedFrame | None = None) -> None:
        if held is not None:
            with contextlib.suppress(ValueError):
                self.conn._parked.remove(held)
        self.conn.pending_out -= 1

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a task that lives as long as the connection."""
        self.conn._track(coro)

    def after_forward(self, action: Callable[[Request], None]) -> None:
        """Run ``action`` right after the request is written upstream."""
        self._after.append(action)

    def private_correlation_id(self) -> int:
        return self.conn._next_private()

    def send_copy(self, corr: int, fault: OpenFault, **note: Any) -> None:
        """Write a copy under correlation id ``corr``; its response closes ``fault``."""
        copy = bytearray(self.frame)
        _I32.pack_into(copy, 8, corr)
        if self.info is not None:
            self.conn.inflight[corr] = Inflight(
                self.api_key, self.info.api_version, swallow=fault, swallow_note=note
            )
        else:
            self.conn._close(fault)
        self.conn.write_up(bytes(copy))

    def forward(self) -> None:
        """Write the request upstream (unless the link now discards it), then release
        the frames its passing releases."""
        conn = self.conn
        if not conn.closed:
            if conn.link.policy().blackhole_request:
                conn._forget(self.corr)
            else:
                conn.write_up(self.frame)
                for action in self._after:
                    action(self)
        for st in self.triggers:
            st.release_held("later request passed")


class Response:
    """A response on its way back to the client: what response rules act through."""

    __slots__ = ("conn", "corr", "frame", "info")

    def __init__(self, conn: ProxiedConnection, corr: int, info: Inflight, frame: bytes) -> None:
        self.conn = conn
        self.corr = corr
        self.info = info
        self.frame = frame  # with its size prefix

    def open_fault(self, kind: str, params: dict[str, Any]) -> OpenFault:
        info = self.info
        target = self.conn._target(info.api_key, info.api_version, self.corr, info.targets)
        target["direction"] = "response"
        return self.conn._open(kind, target, params)

    def close_fault(self, fault: OpenFault, **extra: Any) -> None:
        self.conn._close(fault, **extra)


def _by_kind(states: list[RuleState]) -> list[list[RuleState]]:
    """The applying rules grouped by kind, groups in stage order, rules in install order."""
    if len(states) == 1:
        return [states]
    ordered = sorted(states, key=lambda st: (st.rule.stage, st.rule.kind))
    groups: list[list[RuleState]] = []
    for st in ordered:
        if groups and type(groups[-1][0].rule) is type(st.rule):
            groups[-1].append(st)
        else:
            groups.append([st])
    return groups


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
        #: the node this connection comes from and its incarnation when it was accepted
        #: (a process's connections die with it): None for a client's
        self.source = self.fleet.source_incarnation(link.name)
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
        self._parked: list[ParkedFrame] = []
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
        for parked in self._parked:
            parked.abandon("connection closed")
        self._parked.clear()
        for fault in list(self._open_faults):
            fault.close(outcome="connection closed")
        self._open_faults.clear()

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
            if st.held and st.rule.filters_match(api_key, targets):
                triggers.append(st)
            if st.decide(api_key, targets, now):
                applying.append(st)

        known = cache[0] if cache else None
        if known is None and (policy.request_targets or policy.response_targets) and applying:
            known = targets()
        target = self._target(api_key, version, corr, known)
        target["direction"] = "request"

        info = None
        if api_key != PRODUCE or produce_acks(frame, version) != 0:
            info = Inflight(api_key, version)
            if self.link.resolve is not None and api_key in REWRITE_APIS:
                info.rewrite = True
            if policy.response_targets:
                info.targets = targets()
            self.inflight[corr] = info
            self.order.append(corr)
            self.order_set.add(corr)

        request = Request(self, frame, api_key, corr, now, target, info, tuple(triggers))
        for group in _by_kind(applying) if applying else ():
            if await type(group[0].rule).on_request(group, request):
                return  # the rule took the frame over
        request.forward()

    def _next_private(self) -> int:
        self._private -= 1
        if self._private < -(2**31) + 1:
            self._private = PRIVATE_CORRELATION_BASE
        return self._private

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
            if info.swallow is not None:
                self._close(info.swallow, **(info.swallow_note or {}))
                self._forget(corr)
                return
            if info.rewrite and self.link.resolve is not None:
                new = await rewrite_response(
                    info.api_key, info.api_version, frame, self.link.resolve
                )
                if new is not frame:
                    self.link.stats.rewrites += 1
                    frame = new
            if info.answer_patch is not None:
                frame = info.answer_patch(frame)
        policy = self.link.policy()
        if policy.response_rules and info is not None:
            now = time.time()
            tg = info.targets or NO_TARGETS
            api_key = info.api_key
            applying = [st for st in policy.response_rules if st.decide(api_key, lambda: tg, now)]
            if applying:
                response = Response(self, corr, info, frame)
                for group in _by_kind(applying):
                    await type(group[0].rule).on_response(group, response)
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
