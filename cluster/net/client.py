"""A small asyncio Kafka-protocol client for node-to-node requests.

Nodes talk to each other with ordinary Kafka requests (BrokerRegistration,
Metadata, AllocateProducerIds, WriteTxnMarkers) over plain TCP, so the harness can
put its fault proxy on every link. Requests are pipelined on one connection and
matched to responses by correlation id.

A peer answers a connection's requests in the order it received them (the Kafka
protocol guarantees it), so a response that arrives while older requests are still
pending proves those were lost on the way (a dropped request or response): they fail
at once as :class:`PeerUnavailable`, as Kafka's NetworkClient fails a connection whose
response does not correlate with its oldest request, instead of waiting out their
timeout while the connection goes on serving later requests.

A connection made with ``stall_probe_s`` also asks that question itself: while its
oldest request stays unanswered that long, it sends an ApiVersions probe, whose answer
(after any earlier ones, in order) fails whatever was lost, e.g. in a network fault that
has healed. A lost response then holds its caller, and whatever waits behind it (the
broker's verification queue, the coordinator's markers for a node), about that long
instead of the whole request timeout.

The connection is an :class:`asyncio.Protocol`: responses are cut out of the received
bytes and handed to their waiters in the data callback itself (no reader task, no
stream futures), which matters for the coordinator's WriteTxnMarkers round trips.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from collections.abc import Callable
from typing import Any

from ..protocol.build import make
from ..protocol.codec import decode_response, encode_request, request_class
from ..protocol.framing import FrameBuffer, FrameTooLarge
from ..security.sasl import AuthenticationFailed, SaslCredentials

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Any, BaseException | None], None]
"""Called once with (response, None) or (None, error) by ``request_nowait``."""

MAX_RESPONSE_BYTES = 2**31 - 1
API_VERSIONS = 18
MAX_PROBES = 64
"""Probes in flight on one connection at most (each stall period sends one)."""
STALL_PROBE_S = 1.0
"""How long the node-to-node connections that probe (``stall_probe_s``) let their oldest
request go unanswered before they probe."""
_CORRELATION = struct.Struct(">i")


class PeerUnavailable(ConnectionError):
    """The peer could not be reached or the connection broke mid-request."""


class PeerAuthenticationFailed(PeerUnavailable):
    """The peer refused our SASL credentials (a client gives up instead of retrying)."""


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_peer_sasl: SaslCredentials | None = None


def use_sasl_for_peers(credentials: SaslCredentials | None) -> None:
    """This process is a node of a SASL cluster: its connections to peers authenticate
    with ``credentials`` unless given others (one node per process)."""
    global _peer_sasl
    _peer_sasl = credentials


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class _ResponseProtocol(asyncio.BufferedProtocol):
    """Frames in, responses to the pending futures of one :class:`PeerConnection`
    (reads go straight into a reusable buffer, see ``protocol.framing``)."""

    def __init__(self, owner: PeerConnection) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        #: the connection closed, possibly before its owner took it into use
        self.lost = False
        self._reads = FrameBuffer()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reads.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reads.frames_after(nbytes, MAX_RESPONSE_BYTES)
        except FrameTooLarge as exc:
            frames = exc.frames
            if self.transport is not None:
                self.transport.close()  # garbage: connection_lost fails the waiters
        for frame in frames:
            self.owner._deliver(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.owner._lost(self)


class PeerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        connect_timeout: float = 5.0,
        sasl: SaslCredentials | None = None,
        stall_probe_s: float | None = None,
    ):
        self.host = host
        self.sasl = sasl if sasl is not None else _peer_sasl
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._protocol: _ResponseProtocol | None = None
        # correlation id -> (api key, version, the waiting future or callback)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any] | ResponseCallback]] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}  # of ``request_nowait`` requests
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.stall_probe_s = stall_probe_s
        self._stall_timer: asyncio.TimerHandle | None = None
        self._oldest_seen: int | None = None  # oldest pending request at the last check
        self._probes: set[int] = set()  # correlation ids of probes in flight

    @property
    def connected(self) -> bool:
        protocol = self._protocol
        return (
            protocol is not None
            and protocol.transport is not None
            and not protocol.transport.is_closing()
        )

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _ResponseProtocol(self), self.host, self.port),
                self.connect_timeout,
            )
        except (OSError, TimeoutError) as exc:
            raise PeerUnavailable(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        if protocol.lost or protocol.transport is None or protocol.transport.is_closing():
            # Reset between being made and being taken into use (a fault proxy whose node
            # is down accepts, then resets): its connection_lost came before _protocol was
            # set, so nothing would fail a request written into it, which would wait out
            # its whole timeout.
            raise PeerUnavailable(f"connection to {self.host}:{self.port} closed while connecting")
        self._protocol = protocol
        if self.sasl is not None:
            try:
                await asyncio.wait_for(self._authenticate(self.sasl), self.connect_timeout)
            except AuthenticationFailed as exc:
                self._close_now()
                raise PeerAuthenticationFailed(
                    f"SASL authentication to {self.host}:{self.port} failed: {exc}"
                ) from exc
            except TimeoutError as exc:
                self._close_now()
                raise PeerUnavailable(
                    f"SASL authentication to {self.host}:{self.port} timed out"
                ) from exc

    async def _authenticate(self, credentials: SaslCredentials) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds until the mechanism is done."""
        handshake = await self._send(
            make(request_class(SASL_HANDSHAKE, 1), mechanism=credentials.mechanism)
        )
        if handshake.error_code != 0:
            raise AuthenticationFailed(
                f"{credentials.mechanism} refused ({handshake.error_code.name}); the peer "
                f"offers {list(handshake.mechanisms)}"
            )
        exchange = credentials.exchange()
        token: bytes | None = exchange.first()
        while token is not None:
            answer = await self._send(make(request_class(SASL_AUTHENTICATE, 2), auth_bytes=token))
            if answer.error_code != 0:
                raise AuthenticationFailed(answer.error_message or answer.error_code.name)
            token = exchange.answer(answer.auth_bytes)

    def _send(self, request: Any) -> asyncio.Future[Any]:
        """Write one request on the connection being set up (the caller holds the lock)."""
        protocol = self._protocol
        if protocol is None or protocol.transport is None:
            raise PeerUnavailable(f"connection to {self.host}:{self.port} closed")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        cls = type(request)
        self._pending[correlation_id] = (cls.__api_key__, cls.__version__, fut)
        protocol.transport.write(encode_request(correlation_id, request, self.client_id))
        return fut

    def _deliver(self, frame: bytes) -> None:
        if len(frame) < 4:
            return
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        pending = self._pending
        entry = pending.get(correlation_id)
        if entry is None:
            return
        skipped = [] if next(iter(pending)) == correlation_id else self._sent_before(correlation_id)
        del pending[correlation_id]
        timer = self._timers.pop(correlation_id, None)
        if timer is not None:
            timer.cancel()
        if skipped:
            self._fail_skipped(skipped)
        api_key, api_version, sink = entry
        if isinstance(sink, asyncio.Future) and sink.done():
            return
        try:
            _, response = decode_response(api_key, api_version, frame)
        except Exception as exc:  # surfaced to the caller
            _notify(sink, None, exc)
        else:
            _notify(sink, response, None)

    def _sent_before(self, answered: int) -> list[int]:
        """The pending requests sent before ``answered`` (``_pending`` is in send order)."""
        before = []
        for correlation_id in self._pending:
            if correlation_id == answered:
                break
            before.append(correlation_id)
        return before

    def _fail_skipped(self, skipped: list[int]) -> None:
        """Fail requests whose responses can no longer come (a later one arrived)."""
        log.info(
            "%d request(s) to %s:%d lost: a later response arrived first",
            len(skipped),
            self.host,
            self.port,
        )
        for correlation_id in skipped:
            entry = self._pending.pop(correlation_id, None)
            timer = self._timers.pop(correlation_id, None)
            if timer is not None:
                timer.cancel()
            if entry is not None:
                error = PeerUnavailable(
                    f"no response from {self.host}:{self.port} to request {correlation_id} "
                    f"(api {entry[0]}): a later response arrived first"
                )
                _notify(entry[2], None, error)

    def _lost(self, protocol: _ResponseProtocol) -> None:
        if protocol is self._protocol:
            self._protocol = None
            self._fail_pending(PeerUnavailable(f"connection to {self.host}:{self.port} closed"))

    def _fail_pending(self, exc: Exception) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        self._oldest_seen = None
        self._probes.clear()
        pending, self._pending = self._pending, {}
        timers, self._timers = self._timers, {}
        for timer in timers.values():
            timer.cancel()
        for _, _, sink in pending.values():
            _notify(sink, None, exc)

    def request_nowait(self, request: Any, timeout: float, callback: ResponseCallback) -> bool:
        """Send a request now and have ``callback`` called from the data callback when
        its response arrives (or with the error: connection lost, timeout).

        For the hot path (the coordinator's markers): no task, no future, no extra
        round of the event loop on either side. Returns False, sending nothing, when
        the connection is not up (the caller uses ``request``, which connects).
        """
        protocol = self._protocol
        if (
            protocol is None
            or protocol.transport is None
            or protocol.transport.is_closing()
            or self._lock.locked()
        ):
            return False
        correlation_id = next(self._ids) & 0x7FFFFFFF
        cls = type(request)
        data = encode_request(correlation_id, request, self.client_id)
        self._pending[correlation_id] = (cls.__api_key__, cls.__version__, callback)
        self._timers[correlation_id] = asyncio.get_running_loop().call_later(
            timeout, self._expire_callback, correlation_id, cls.__name__, timeout
        )
        protocol.transport.write(data)
        if self._stall_timer is None and self.stall_probe_s is not None:
            self._watch_stalls()
        return True

    def _expire_callback(self, correlation_id: int, name: str, timeout: float) -> None:
        self._timers.pop(correlation_id, None)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            return  # answered in time
        self._close_now()
        _notify(
            entry[2],
            None,
            PeerUnavailable(f"{name} to {self.host}:{self.port} timed out after {timeout}s"),
        )

    async def request(self, request: Any, timeout: float = 10.0) -> Any:
        """Send one request entity and await its response entity."""
        async with self._lock:
            if not self.connected:
                await self._connect()
            protocol = self._protocol
            if protocol is None or protocol.transport is None:  # lost while authenticating
                raise PeerUnavailable(f"connection to {self.host}:{self.port} closed")
            correlation_id = next(self._ids) & 0x7FFFFFFF
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            cls = type(request)
            self._pending[correlation_id] = (cls.__api_key__, cls.__version__, fut)
            protocol.transport.write(encode_request(correlation_id, request, self.client_id))
            if self._stall_timer is None and self.stall_probe_s is not None:
                self._watch_stalls()
        # A timer instead of asyncio.wait_for, which costs a task per request.
        timer = asyncio.get_running_loop().call_later(timeout, _expire, fut)
        try:
            return await fut
        except TimeoutError as exc:
            self._pending.pop(correlation_id, None)
            await self.close()
            raise PeerUnavailable(
                f"{cls.__name__} to {self.host}:{self.port} timed out after {timeout}s"
            ) from exc
        finally:
            timer.cancel()

    async def close(self) -> None:
        self._close_now()

    def _watch_stalls(self) -> None:
        assert self.stall_probe_s is not None
        self._stall_timer = asyncio.get_running_loop().call_later(
            self.stall_probe_s, self._check_stall
        )

    def _check_stall(self) -> None:
        """Every stall period while requests are pending: if the oldest one is the same
        as at the previous check, probe the connection."""
        self._stall_timer = None
        oldest = next(iter(self._pending), None)
        if oldest is None:
            self._oldest_seen = None
            return  # the next request starts watching again
        if oldest == self._oldest_seen and len(self._probes) < MAX_PROBES:
            self._send_probe()
        self._oldest_seen = oldest
        self._watch_stalls()

    def _send_probe(self) -> None:
        protocol = self._protocol
        if (
            protocol is None
            or protocol.transport is None
            or protocol.transport.is_closing()
            or self._lock.locked()  # connecting: nothing may come between SASL steps
        ):
            return
        correlation_id = next(self._ids) & 0x7FFFFFFF
        probe = make(request_class(API_VERSIONS, 0))
        self._probes.add(correlation_id)

        def answered(response: Any, error: BaseException | None) -> None:
            self._probes.discard(correlation_id)

        self._pending[correlation_id] = (API_VERSIONS, 0, answered)
        protocol.transport.write(encode_request(correlation_id, probe, self.client_id))

    def _close_now(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
        self._fail_pending(PeerUnavailable("connection closed"))


def _notify(
    sink: asyncio.Future[Any] | ResponseCallback, response: Any, error: BaseException | None
) -> None:
    if isinstance(sink, asyncio.Future):
        if sink.done():
            return
        if error is None:
            sink.set_result(response)
        else:
            sink.set_exception(error)
        return
    try:
        sink(response, error)
    except Exception:
        log.exception("response callback failed")
