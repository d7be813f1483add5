"""The node's Kafka-protocol TCP server.

Each connection is an :class:`asyncio.Protocol` that cuts size-prefixed frames out of
the bytes it receives and answers them strictly in order, one at a time, as Kafka
does (it mutes a connection while a request is in flight). Connections are
independent, so a long-polling Fetch or JoinGroup on one connection never holds up
another.

A handler is an ``async def``, but most complete without ever suspending (Produce,
EndTxn, WriteTxnMarkers, ...). The server therefore starts each handler coroutine
right in the data callback and, if it finishes there, writes the response at once;
only a handler that really waits (a long-poll, a held AddPartitionsToTxn) is
finished in a task, and the connection's next frames wait for it. This saves the
task, the stream reader futures and several event-loop rounds per request.

Bad input follows Kafka: a frame larger than ``max_frame_bytes``, an unknown API
key or version, or a body that does not decode (or whose counts and lengths do not
fit it: ``protocol.frame_guard``) closes that connection (nothing else is
affected); ApiVersions with an unsupported version is answered with a v0 response
carrying UNSUPPORTED_VERSION and the supported ranges, so the client can downgrade.
What clients may hold (connections, queued requests, request memory, idle time) is
bounded by :mod:`.limits`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import socket
import struct
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.build import make
from ..protocol.codec import (
    ProtocolError,
    UnsupportedApi,
    decode_request_as,
    encode_response,
    read_prefix,
    response_class,
)
from ..protocol.framing import FrameBuffer, FrameTooLarge
from .dispatch import ApiRegistry, RequestContext
from .eager import finish
from .limits import ConnectionLimits, RequestMemory, RequestQueue

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_monotonic = time.monotonic
_PREFIX = struct.Struct(">hhi")

DEAD_PEER_CHECK_S = 1.0
"""How often connections that are not being read are checked for a client that left."""
GONE_STATES = (7, 8)
"""``tcpi_state`` of a socket whose peer reset it (Linux ``TCP_CLOSE``) or ended its
input (``TCP_CLOSE_WAIT``)."""

MAX_QUEUED_FRAMES = 16
"""Complete frames a connection may queue behind a request in flight before the
server stops reading from it (a client pipelining faster than it is answered)."""


class CloseConnection(Exception):
    """Raised by a handler to close the client's connection without a response
    (Kafka does this e.g. for a failed acks=0 produce)."""


RequestObserver = Callable[[int, int, Any, float, int, int], None]
"""(api_key, api_version, response_or_None, seconds, bytes_in, bytes_out)."""


class _Connection(asyncio.BufferedProtocol):
    """One client connection: frames in, responses out, in order. Reads go straight
    into a reusable buffer (see ``protocol.framing``)."""

    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.conn_id = next(server._ids)
        self.peer = "?"
        self.transport: asyncio.Transport | None = None
        self._reads = FrameBuffer()
        self._too_large: FrameTooLarge | None = None
        self._frames: collections.deque[bytes] = collections.deque()
        self._busy = False  # a handler of this connection is running in a task
        self._write_paused = False
        self._read_stops: set[str] = set()  # why reading is paused: "queue", "memory", ...
        self._closed = False
        self._eof = False
        self._ip = ""
        self._registered = False
        self._reserved = 0  # request memory reserved for the partial frame
        self._wanted = 0  # request memory waited for
        self.last_active = _monotonic()
        self.diverted: Callable[[bytes], bytes] | None = None  # see KafkaServer.divert_frames

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peername = transport.get_extra_info("peername")
        if peername:
            self._ip = str(peername[0])
            self.peer = f"{peername[0]}:{peername[1]}"
        refusal = self.server._admit(self._ip)
        if refusal is not None:
            log.info("refusing %s: %s", self.peer, refusal)
            self._closed = True
            transport.abort()
            return
        self._registered = True
        self.server._add_connection(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._drop_queued()
        server = self.server
        server.memory.forget(self.conn_id)
        server.queue.forget(self.conn_id)
        if self._reserved:
            server.memory.release(self._reserved)
            self._reserved = 0
        if self._registered:
            self._registered = False
            server._remove_connection(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._process()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reads.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        self.last_active = _monotonic()
        try:
            frames = self._reads.frames_after(nbytes, self.server.max_frame_bytes)
        except FrameTooLarge as exc:
            # Answer what came before it, then close (as reading it in order would).
            self._queue(exc.frames)
            self._too_large = exc
            self._stop_reading("too large")
            self._process()
            return
        if frames:
            self._queue(frames)
        self._reserve_partial_frame()
        if frames:
            self._process()

    # -- what the connection holds ---------------------------------------------------
    def _queue(self, frames: list[bytes]) -> None:
        self._frames.extend(frames)
        queue = self.server.queue
        queue.add(len(frames))
        if queue.full and "queue" not in self._read_stops:
            self._stop_reading("queue")
            queue.stop(self.conn_id, lambda: self._resume_reading("queue"))

    def _drop_queued(self) -> None:
        if self._frames:
            count = len(self._frames)
            self._frames.clear()
            self.server.queue.remove(count)

    def _reserve_partial_frame(self) -> None:
        """A frame larger than the usual buffer needs its whole size reserved in the
        node's request memory before more of it is read (see ``limits``)."""
        claim = self._reads.partial_frame
        need = claim if claim > self._reads.initial else 0
        if need == self._reserved or "memory" in self._read_stops:
            return
        memory = self.server.memory
        if self._reserved:
            memory.release(self._reserved)
            self._reserved = 0
        if need and not memory.try_reserve(self.conn_id, need, self._memory_granted):
            self._wanted = need
            self._stop_reading("memory")
        elif need:
            self._reserved = need

    def _memory_granted(self) -> None:
        self._reserved, self._wanted = self._wanted, 0
        self._resume_reading("memory")

    def _stop_reading(self, reason: str) -> None:
        if not self._read_stops and self.transport is not None and not self._closed:
            self.transport.pause_reading()
        self._read_stops.add(reason)

    def _resume_reading(self, reason: str) -> None:
        if reason not in self._read_stops:
            return
        self._read_stops.discard(reason)
        if not self._read_stops and self.transport is not None and not self._closed:
            self.transport.resume_reading()

    def peer_gone(self) -> bool:
        """Whether the client reset the connection or ended its input. A connection that
        is not being read (``_read_stops``: a queue or memory limit, a request in flight
        with frames behind it) cannot see its client leave, and would hold its queued
        requests, memory and connection slot until the request in flight ends (a Fetch or
        JoinGroup may wait for hours): the kernel's TCP state tells without reading. At
        the end of a client's input Kafka closes the connection; so does the sweeper for
        these connections (a connection being read still answers what came before it)."""
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None or not hasattr(socket, "TCP_INFO"):
            return False
        try:
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
        except OSError:
            return False
        if not info:
            return False
        if self._eof:  # its end of input is known: only a reset says it is gone
            return info[0] == GONE_STATES[0]
        return info[0] in GONE_STATES

    def abort(self) -> None:
        """Close at once, dropping what is queued and unsent."""
        self._closed = True
        self._drop_queued()
        if self.transport is not None:
            self.transport.abort()

    @property
    def idle(self) -> bool:
        """Nothing in flight or queued: only the client can make it active again."""
        return not self._busy and not self._frames

    def eof_received(self) -> bool | None:
        # The client will send nothing more: answer what it sent, then close.
        self._eof = True
        if self._busy or self._frames:
            self._probe_peer()
            return True  # keep the transport open for the responses still due
        return None  # close the transport

    def _probe_peer(self) -> None:
        """Keepalive probes on a connection past its client's end of input, so that a
        client that closed for good (not only its sending side) answers them with a
        reset, which ``peer_gone`` sees: asyncio reads no more after the end of input,
        and a request that waits (a long-poll) would hold the connection until it ends."""
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None or not hasattr(socket, "TCP_KEEPIDLE"):
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
        except OSError:
            pass

    # -- processing ------------------------------------------------------------------
    def _close(self) -> None:
        self._closed = True
        self._drop_queued()
        if self.transport is not None:
            self.transport.close()

    def _process(self, answered: bytes | None = None) -> None:
        """Answer queued frames in order until one needs to wait (or the client does
        not read its responses).

        The responses to frames that arrived together (a client pipelining, as
        librdkafka does with one Produce per partition) go out in one write: one
        syscall here and one wake-up of the client instead of one per response;
        ``answered``, the response of a request that had to wait, goes out with them.
        """
        frames = self._frames
        server = self.server
        out: list[bytes] = [] if answered is None else [answered]
        while frames and not self._busy and not self._write_paused and not self._closed:
            frame = frames.popleft()
            server.queue.remove(1)
            try:
                outcome = server._start_frame(frame, self)
            except CloseConnection:
                self._flush(out)
                self._close()
                return
            except ProtocolError as exc:
                self._flush(out)
                server.protocol_errors += 1
                log.info("closing %s: %s", self.peer, exc)
                self._close()
                return
            if outcome is SUSPENDED:
                self._busy = True  # _Suspended calls _handler_finished
                break
            if isinstance(outcome, asyncio.Future):
                self._busy = True
                outcome.add_done_callback(self._on_handler_done)
                break
            if outcome is not None:
                out.append(outcome)
        self._flush(out)
        transport = self.transport
        if transport is None or self._closed:
            return
        if (self._eof or self._too_large is not None) and not frames and not self._busy:
            if self._too_large is not None:
                server.protocol_errors += 1
                log.warning("closing %s: %s", self.peer, self._too_large)
            self._close()
            return
        if len(frames) >= MAX_QUEUED_FRAMES:
            self._stop_reading("pipelined")
        else:
            self._resume_reading("pipelined")
        if not frames and "queue" in self._read_stops:
            # queued.max.requests stops the connections that hold queued requests; one
            # whose own are all started holds none. Left stopped until the node's queue
            # drained, it waited on frames stuck behind other clients' long waits (a
            # Fetch or JoinGroup parked for minutes), served nothing more, and did not
            # even see its client leave: such connections piled up to max.connections.
            server.queue.forget(self.conn_id)
            self._resume_reading("queue")

    def _write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def _flush(self, out: list[bytes]) -> None:
        if out:
            self._write(out[0] if len(out) == 1 else b"".join(out))

    def _on_handler_done(self, task: asyncio.Future[bytes | None]) -> None:
        if task.cancelled():
            self._busy = False
            if not self._closed:
                self._close()
            return
        exc = task.exception()
        self._handler_finished(None if exc is not None else task.result(), exc)

    def _handler_finished(self, data: bytes | None, exc: BaseException | None) -> None:
        """A handler that had to wait is done: answer (or close), then go on."""
        self._busy = False
        self.last_active = _monotonic()
        if self._closed:
            return  # nothing to answer any more
        if exc is not None:
            if isinstance(exc, ProtocolError):
                self.server.protocol_errors += 1
                log.info("closing %s: %s", self.peer, exc)
            elif not isinstance(exc, CloseConnection):
                log.error("request of %s failed", self.peer, exc_info=exc)
            self._close()
            return
        self._process(data)


SUSPENDED: Any = object()
"""``_start_frame``'s answer for a handler parked on a future (see :class:`_Suspended`)."""


class _Suspended:
    """A handler coroutine waiting on a future, resumed from that future's done
    callback rather than by a task (the common wait: AddPartitionsToTxn held until
    the previous transaction's markers are written). It answers as soon as it
    resumes, one event-loop round earlier than a task would, and costs no task."""

    __slots__ = ("bytes_in", "conn", "coro", "ctx", "server", "started")

    def __init__(
        self,
        server: KafkaServer,
        conn: _Connection,
        ctx: RequestContext,
        coro: Coroutine[Any, Any, Any],
        started: float,
        bytes_in: int,
    ) -> None:
        self.server = server
        self.conn = conn
        self.ctx = ctx
        self.coro = coro
        self.started = started
        self.bytes_in = bytes_in

    def park(self, yielded: Any) -> bytes | asyncio.Future[bytes | None] | None:
        """Wait for what the coroutine yielded; SUSPENDED, or a task finishing it when
        it yielded something other than a future to wait on (a bare ``yield``)."""
        if isinstance(yielded, asyncio.Future) and yielded._asyncio_future_blocking:
            yielded._asyncio_future_blocking = False
            yielded.add_done_callback(self._resume)
            return SUSPENDED
        server, ctx = self.server, self.ctx
        task = asyncio.ensure_future(
            server._complete(ctx, self.coro, yielded, self.started, self.bytes_in)
        )
        server._handler_tasks.add(task)
        task.add_done_callback(server._handler_tasks.discard)
        return task

    def _resume(self, _: asyncio.Future[Any]) -> None:
        server, ctx = self.server, self.ctx
        if server.stopping:
            # The node is stopping (what it waited on was let go, e.g. a verification the
            # stop failed): its connection is closed and its partitions may be, so the
            # handler does not go on to act on them (Kafka drains its request handlers
            # before it closes its logs)
            _cancel(self.coro)
            self.conn._handler_finished(None, CloseConnection("node stopping"))
            return
        try:
            yielded = self.coro.send(None)
        except StopIteration as stop:
            try:
                data = server._answer(ctx, stop.value, self.started, self.bytes_in)
            except Exception as exc:
                log.exception("encoding the response to api %d failed", ctx.api_key)
                self.conn._handler_finished(None, CloseConnection(str(exc)))
                return
            self.conn._handler_finished(data, None)
            return
        except CloseConnection as exc:
            server._observe(ctx.api_key, ctx.api_version, None, self.started, self.bytes_in, 0)
            self.conn._handler_finished(None, exc)
            return
        except asyncio.CancelledError:
            # what it waited on was cancelled: the node is stopping (not a failure to log)
            self.conn._handler_finished(None, CloseConnection("request cancelled"))
            return
        except Exception as exc:
            log.exception("handler for api %d v%d failed", ctx.api_key, ctx.api_version)
            self.conn._handler_finished(None, CloseConnection(str(exc)))
            return
        outcome = self.park(yielded)
        if isinstance(outcome, asyncio.Future):
            outcome.add_done_callback(self.conn._on_handler_done)


def _cancel(coro: Coroutine[Any, Any, Any]) -> None:
    """End a suspended handler as a cancelled task ends: CancelledError where it waits (its
    ``finally`` blocks and cleanups run); should it wait again, it is closed there."""
    try:
        coro.throw(asyncio.CancelledError())
    except (StopIteration, asyncio.CancelledError, Exception):  # ended, however it ended
        return
    coro.close()


class KafkaServer:
    def __init__(
        self,
        registry: ApiRegistry,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = 100 * 1024 * 1024,
        observer: RequestObserver | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.observer = observer
        self.limits = limits or ConnectionLimits()
        if self.limits.queued_max_request_bytes < max_frame_bytes + 4:
            raise ValueError(
                f"queued.max.request.bytes ({self.limits.queued_max_request_bytes}) must hold "
                f"one frame of socket.request.max.bytes ({max_frame_bytes}) and its prefix"
            )
        self.memory = RequestMemory(self.limits.queued_max_request_bytes)
        self.queue = RequestQueue(self.limits.queued_max_requests)
        self._server: asyncio.Server | None = None
        self._connections: dict[int, _Connection] = {}
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._ids = itertools.count(1)
        self._idle_sweeper: asyncio.Task[None] | None = None
        self.on_connection_closed: Callable[[int], None] | None = None
        """Told the id of every connection that closed (per-connection state elsewhere,
        e.g. a SASL session)."""
        self.protocol_errors = 0
        #: set by stop(): handlers still waiting are not resumed, tasks finishing them cancelled
        self.stopping = False
        self._handler_tasks: set[asyncio.Future[bytes | None]] = set()
        self.refused_connections = 0
        self.idle_closed = 0
        self.dead_closed = 0

    async def bind(self) -> int:
        """Bind the listening socket (so the port is known) without accepting yet."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self),
            self.host,
            self.port,
            reuse_address=True,
            start_serving=False,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def serve(self) -> None:
        """Start accepting connections (every handler is registered by now)."""
        assert self._server is not None, "bind() first"
        await self._server.start_serving()
        self._idle_sweeper = asyncio.ensure_future(self._close_idle_connections())

    async def start(self) -> int:
        port = await self.bind()
        await self.serve()
        return port

    async def stop(self) -> None:
        """Stop accepting, close every connection and end the handlers still running, so
        that nothing acts on the node's state (its partitions, its coordinators) after this
        returns and the node goes on to close it."""
        self.stopping = True
        if self._idle_sweeper is not None:
            self._idle_sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections.values()):
            if conn.transport is not None:
                conn.transport.close()
        tasks = list(self._handler_tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def divert_frames(self, connection_id: int, reader: Callable[[bytes], bytes] | None) -> None:
        """Hand a connection's next frames to ``reader`` (which returns the bytes to send
        back, or raises CloseConnection) instead of the API handlers, until called again
        with None: SASL tokens after SaslHandshake v0 are frames without a request header."""
        conn = self._connections.get(connection_id)
        if conn is not None:
            conn.diverted = reader

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # -- connection limits -----------------------------------------------------------
    def _admit(self, ip: str) -> str | None:
        """Why a new connection from ``ip`` is refused, or None to accept it."""
        limits = self.limits
        if len(self._connections) >= limits.max_connections:
            self.refused_connections += 1
            return f"max.connections ({limits.max_connections}) reached"
        if self._per_ip[ip] >= limits.max_connections_per_ip:
            self.refused_connections += 1
            return f"max.connections.per.ip ({limits.max_connections_per_ip}) reached"
        return None

    def _add_connection(self, conn: _Connection) -> None:
        self._connections[conn.conn_id] = conn
        self._per_ip[conn._ip] += 1

    def _remove_connection(self, conn: _Connection) -> None:
        self._connections.pop(conn.conn_id, None)
        if self.on_connection_closed is not None:
            self.on_connection_closed(conn.conn_id)
        self._per_ip[conn._ip] -= 1
        if self._per_ip[conn._ip] <= 0:
            del self._per_ip[conn._ip]

    async def _close_idle_connections(self) -> None:
        """``connections.max.idle.ms``: close connections the client left silent; and
        connections not being read whose client is gone (see ``peer_gone``)."""
        idle_s = self.limits.connections_max_idle_ms / 1000
        period = min(max(idle_s / 10, 0.05), DEAD_PEER_CHECK_S)
        while True:
            await asyncio.sleep(period)
            cutoff = _monotonic() - idle_s
            for conn in list(self._connections.values()):
                if (conn._read_stops or conn._eof) and conn.peer_gone():
                    self.dead_closed += 1
                    log.info("closing %s: its client is gone", conn.peer)
                    conn.abort()
                    continue
                if conn.last_active < cutoff and conn.idle and conn.transport is not None:
                    self.idle_closed += 1
                    log.info("closing %s: idle for %.0f s", conn.peer, idle_s)
                    conn.transport.close()

    # -- one request -----------------------------------------------------------------
    def _start_frame(
        self, frame: bytes, conn: _Connection
    ) -> bytes | asyncio.Future[bytes | None] | None:
        """Answer one frame: the response bytes (None: no response); SUSPENDED when the
        handler waits on a future (the connection is told when it is done); or a task
        finishing a handler that waits otherwise. Raises ProtocolError or
        CloseConnection to close the connection."""
        diverted = conn.diverted
        if diverted is not None:
            return diverted(frame)
        started = _monotonic()  # what loop.time() returns, without two calls
        if len(frame) < _PREFIX.size:
            read_prefix(frame)  # raises the ProtocolError
        api_key, api_version, correlation_id = _PREFIX.unpack_from(frame, 0)
        spec = self.registry.get(api_key)
        if api_key == API_VERSIONS_KEY and not self.registry.supports(api_key, api_version):
            # KIP-511: answer with v0 and the supported ranges so the client downgrades.
            response = make(
                response_class(API_VERSIONS_KEY, 0),
                error_code=ErrorCode.unsupported_version,
                api_keys=self.api_version_ranges(),
            )
            return encode_response(correlation_id, response)
        if spec is None or not (spec.min_version <= api_version <= spec.max_version):
            raise ProtocolError(f"unsupported api key {api_key} version {api_version}")
        try:
            header, request = decode_request_as(frame, api_key, api_version)
        except UnsupportedApi as exc:
            raise ProtocolError(str(exc)) from exc
        ctx = RequestContext(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=getattr(header, "client_id", None),
            peer=conn.peer,
            connection_id=conn.conn_id,
            frame=frame,
            pipelined=conn._frames,
        )
        coro: Coroutine[Any, Any, Any] = spec.handler(ctx, request)  # type: ignore[assignment]
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            return self._answer(ctx, stop.value, started, len(frame))
        except CloseConnection:
            self._observe(api_key, api_version, None, started, len(frame), 0)
            raise
        except Exception as exc:
            # A bug in a handler: Kafka would answer UNKNOWN_SERVER_ERROR; we close the
            # connection (the client retries) and keep serving everyone else.
            log.exception("handler for api %d v%d failed", api_key, api_version)
            raise CloseConnection from exc
        return _Suspended(self, conn, ctx, coro, started, len(frame)).park(yielded)

    async def _complete(
        self,
        ctx: RequestContext,
        coro: Coroutine[Any, Any, Any],
        yielded: Any,
        started: float,
        bytes_in: int,
    ) -> bytes | None:
        try:
            response = await finish(coro, yielded)
        except CloseConnection:
            self._observe(ctx.api_key, ctx.api_version, None, started, bytes_in, 0)
            raise
        except Exception as exc:
            log.exception("handler for api %d v%d failed", ctx.api_key, ctx.api_version)
            raise CloseConnection from exc
        return self._answer(ctx, response, started, bytes_in)

    def _answer(
        self, ctx: RequestContext, response: Any, started: float, bytes_in: int
    ) -> bytes | None:
        if response is None:
            self._observe(ctx.api_key, ctx.api_version, None, started, bytes_in, 0)
            return None
        data = encode_response(ctx.correlation_id, response)
        self._observe(ctx.api_key, ctx.api_version, response, started, bytes_in, len(data))
        return data

    def _observe(
        self,
        api_key: int,
        api_version: int,
        response: Any,
        started: float,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        if self.observer is not None:
            elapsed = _monotonic() - started
            self.observer(api_key, api_version, response, elapsed, bytes_in + 4, bytes_out)

    def api_version_ranges(self) -> list[dict[str, int]]:
        """What ApiVersions offers: the served ranges, except that Produce is offered from
        v0 (as Kafka 4.x, KAFKA-18659: librdkafka fails compressed produce with a broker
        whose Produce minimum is above 0); v0-v2 themselves stay refused."""
        return [
            {
                "api_key": s.api_key,
                "min_version": ADVERTISED_MIN_VERSION.get(s.api_key, s.min_version),
                "max_version": s.max_version,
            }
            for s in self.registry.specs()
        ]


#: API key -> the minimum version ApiVersions offers when it is below the served one
ADVERTISED_MIN_VERSION = {0: 0}  # Produce (KAFKA-18659)


def register_api_versions(
    registry: ApiRegistry,
    server: KafkaServer,
    features: Callable[[], tuple[dict[str, int], int]] | None = None,
    supported: dict[str, tuple[int, int]] | None = None,
) -> None:
    """ApiVersions v0-v4, answered from the registry (so it lists exactly what is
    served), with the node's supported features and the cluster's finalized levels
    (``features``: () -> (levels, epoch)). As Kafka (KAFKA-17492), v0-v3 omit supported
    features whose minimum level is 0, which older clients cannot parse."""

    async def handle(ctx: RequestContext, request: Any) -> Any:
        levels, epoch = features() if features is not None else ({}, -1)
        return ctx.respond(
            error_code=0,
            api_keys=server.api_version_ranges(),
            throttle_time=0,
            supported_features=[
                {"name": name, "min_version": low, "max_version": high}
                for name, (low, high) in sorted((supported or {}).items())
                if low > 0 or ctx.api_version >= 4
            ],
            finalized_features_epoch=epoch,
            finalized_features=[
                {"name": name, "min_version_level": level, "max_version_level": level}
                for name, level in sorted(levels.items())
                if level > 0
            ],
            zk_migration_ready=False,
        )

    registry.register(API_VERSIONS_KEY, 0, 4, handle, owner="node")
