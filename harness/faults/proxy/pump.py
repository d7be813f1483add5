"""Moving bytes one way across a proxied connection, on asyncio buffered protocols.

A :class:`Pump` owns a read buffer its source socket reads into (``get_buffer``;
``recv_into``, no allocation per read), splits each chunk into frames and writes to
its destination. As long as every frame is PASSed (or discarded) the work is
synchronous, in the callback, with no task, queue or copy (streams cost about a
third of the throughput in measurements here). The first captured frame of a chunk
switches the pump to a task that awaits the frame handler (which may delay, hold,
rewrite) while reading from the source is paused; chunks that still arrive are
copied, queued and processed by the same task, in order. A chunk that lies wholly
inside a PASSed frame (the body of a large Fetch response or Produce request) is
written as it is, with no event list (:meth:`FrameSplitter.pass_inside`).

Read buffer. It starts small (:data:`READ_MIN`) and doubles, up to :data:`READ_MAX`,
each time a read fills it: a large Fetch response then crosses the proxy in one or
two ``recv_into``/``send`` pairs instead of one per 256 KiB (the default asyncio read
size), and idle connections keep a small buffer. The buffer is reused, so bytes
handed to a transport must not be referenced by it once ``write`` returns: Python
3.11's selector transports copy what they cannot send at once, later versions (and
other event loops, e.g. uvloop) keep a reference (:func:`keeps_unsent`); there, a
write into a backlogged transport gets a copy, and a buffer the transport still
references after a write is retired (a new one is allocated for the next read)
unless the transport has drained it.

Backpressure: a destination whose write buffer fills up (:data:`WRITE_HIGH`) pauses
its pump's source (``pause_writing``/``resume_writing``). Throttled directions always
go through the task, which sleeps before forwarding each burst.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .framing import Decide, Event, FrameSplitter
from .rules import TokenBucket

log = logging.getLogger(__name__)

FrameHandler = Callable[[bytes], Awaitable[None]]

READ_MIN = 64 * 1024
READ_MAX = 1024 * 1024
"""Bounds of a pump's read buffer (see the module docstring)."""

WRITE_HIGH = 2 * READ_MAX
"""Write-buffer high-water mark of every proxied socket. Above asyncio's 64 KiB
default so that one full read that the peer does not take at once does not pause
the source at once (each pause/resume is a pair of ``epoll_ctl`` calls and a lost
chance to read while the peer drains)."""

WRITE_KEEPS_DATA: bool | None = None
"""Force :func:`keeps_unsent`'s answer (tests); None: decide by transport type."""


def keeps_unsent(transport: Any) -> bool:
    """Whether ``transport.write`` may keep a reference to data it could not send at
    once instead of copying it (only asyncio's own socket transport before 3.12 is
    known to copy)."""
    if WRITE_KEEPS_DATA is not None:
        return WRITE_KEEPS_DATA
    copies = sys.version_info < (3, 12) and type(transport).__module__ == "asyncio.selector_events"
    return not copies


class ByteCounts(Protocol):
    """Where a pump counts the bytes it reads (a link's stats)."""

    bytes_up: int
    bytes_down: int


class Pump:
    __slots__ = (
        "_grow",
        "_keeps",
        "_lent",
        "_pauses",
        "_read",
        "after_chunk",
        "bytes",
        "closed",
        "counts",
        "decide",
        "deferred",
        "dst",
        "frames",
        "mid_pass",
        "on_error",
        "on_frame",
        "queue",
        "splitter",
        "src",
        "task",
        "throttle",
        "up",
    )

    def __init__(
        self,
        head_len: int,
        decide: Decide,
        on_frame: FrameHandler,
        throttle: Callable[[], tuple[TokenBucket, ...]],
        after_chunk: Callable[[], None] | None,
        on_error: Callable[[BaseException], None],
        counts: ByteCounts,
        up: bool,
    ) -> None:
        self.splitter = FrameSplitter(head_len)
        self.counts = counts
        self.up = up  # reads count as bytes_up (client -> upstream) or bytes_down
        self.decide = decide
        self.on_frame = on_frame
        self.throttle = throttle
        self.after_chunk = after_chunk
        self.on_error = on_error
        self.src: asyncio.Transport | None = None
        self.dst: asyncio.Transport | None = None
        self.queue: deque[bytes] = deque()
        self.task: asyncio.Task[None] | None = None
        self.mid_pass = False  # the last PASS write ended inside a frame
        self.deferred: list[bytes] = []
        self._pauses: set[str] = set()
        self._read = memoryview(bytearray(READ_MIN))
        self._grow = False  # the last read filled the buffer: double it
        self._lent = False  # a transport may still reference the buffer
        self._keeps: bool | None = None  # keeps_unsent(dst), once known
        self.bytes = 0
        self.frames = 0  # captured frames
        self.closed = False

    # ------------------------------------------------------------------ flow control

    def pause(self, why: str) -> None:
        if not self._pauses and self.src is not None and not self.closed:
            self.src.pause_reading()
        self._pauses.add(why)

    def resume(self, why: str) -> None:
        if why not in self._pauses:
            return
        self._pauses.discard(why)
        if not self._pauses and self.src is not None and not self.closed:
            self.src.resume_reading()

    # ------------------------------------------------------------------ writing

    def write_frame(self, frame: bytes) -> None:
        """Write one whole frame from outside the byte stream (timers, other pumps)."""
        if self.closed or self.dst is None:
            return
        if self.mid_pass:
            self.deferred.append(frame)
            return
        self.bytes += len(frame)
        self.dst.write(frame)

    def _pass(self, payload: Any, complete: bool) -> None:
        dst = self.dst
        assert dst is not None
        self.bytes += len(payload)
        keeps = self._keeps
        if keeps is None:
            keeps = self._keeps = keeps_unsent(dst)
        if keeps and type(payload) is memoryview:  # a slice of the read buffer
            if dst.get_write_buffer_size():
                dst.write(bytes(payload))  # it would be kept, not sent
            else:
                dst.write(payload)  # sent at once, unless the socket is full
                if dst.get_write_buffer_size():
                    self._lent = True
        else:
            dst.write(payload)
        self.mid_pass = not complete
        if complete and self.deferred:
            frames, self.deferred = self.deferred, []
            for f in frames:
                self.write_frame(f)

    # ------------------------------------------------------------------ reading

    def get_buffer(self) -> memoryview:
        """The buffer the next read goes into (never one a transport still holds)."""
        buf = self._read
        size = len(buf)
        fresh = False
        if self._grow:
            self._grow = False
            size = min(2 * size, READ_MAX)
            fresh = True
        if self._lent:
            self._lent = False
            # drained: the transport dropped its reference; otherwise leave it the buffer
            fresh = fresh or (self.dst is not None and bool(self.dst.get_write_buffer_size()))
        if fresh:
            buf = self._read = memoryview(bytearray(size))
        return buf

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the buffer returned by :meth:`get_buffer`."""
        if self.up:
            self.counts.bytes_up += nbytes
        else:
            self.counts.bytes_down += nbytes
        buf = self._read
        if nbytes == len(buf) and nbytes < READ_MAX:
            self._grow = True
        self.data_received(buf[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """Process one chunk; a memoryview ``data`` is only valid during the call
        (or while reading is paused: the buffer is not read into then)."""
        if self.closed:
            return
        if self.task is not None or self.dst is None or self.throttle():
            self.queue.append(bytes(data))
            self.pause("busy")
            if self.dst is not None:
                self._start(None)
            return
        if self.splitter.pass_inside(len(data)):  # the body of a large frame
            self._pass(data, False)
            return
        events = self.splitter.feed(data, self.decide)
        for i, (ev, payload, complete) in enumerate(events):
            if ev is Event.PASS:
                self._pass(payload, complete)
            elif not self.closed:
                self.pause("busy")
                self._start(events[i:])
                return
        if self.after_chunk is not None:
            self.after_chunk()

    def connected(self) -> None:
        """The destination is set: forward what arrived before (event loops that
        deliver data although reading was paused in ``connection_made``)."""
        if self.queue and self.task is None:
            self._start(None)

    def _start(self, events: list[tuple[Event, Any, bool]] | None) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(self._run(events))

    async def _run(self, events: list[tuple[Event, Any, bool]] | None) -> None:
        try:
            if events:
                await self._handle(events)
            while self.queue and not self.closed:
                data = self.queue.popleft()
                buckets = self.throttle()
                if not buckets:
                    await self._handle(self.splitter.feed(data, self.decide))
                    continue
                step = max(512, int(min(b.burst for b in buckets)))
                for lo in range(0, len(data), step):
                    piece = data[lo : lo + step]
                    wait = max(b.take(len(piece)) for b in buckets)
                    if wait > 0:
                        await asyncio.sleep(wait)
                    await self._handle(self.splitter.feed(piece, self.decide))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a closed socket: end the connection
            log.debug("pump failed: %r", exc, exc_info=True)
            self.on_error(exc)
        finally:
            self.task = None
            self.resume("busy")

    async def _handle(self, events: list[tuple[Event, Any, bool]]) -> None:
        for ev, payload, complete in events:
            if self.closed:
                return
            if ev is Event.PASS:
                self._pass(payload, complete)
            else:
                self.frames += 1
                await self.on_frame(payload)
        if self.after_chunk is not None:
            self.after_chunk()

    def close(self) -> None:
        self.closed = True
        if self.task is not None:
            self.task.cancel()


class Side(asyncio.BufferedProtocol):
    """One socket of a proxied connection.

    Reads go straight to the pump this socket feeds (``owner.side_made`` returns it);
    other events are forwarded to the owner.
    """

    def __init__(self, owner: Any, which: str) -> None:
        self.owner = owner
        self.which = which  # "client" | "upstream"
        self.transport: asyncio.Transport | None = None
        self.reader: Pump | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=WRITE_HIGH)  # type: ignore[attr-defined]
        self.reader = self.owner.side_made(self.which, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        reader = self.reader
        if reader is None:  # refused or closed: whatever arrives is dropped
            return memoryview(bytearray(READ_MIN))
        return reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        reader = self.reader
        if reader is not None:
            reader.buffer_updated(nbytes)

    def eof_received(self) -> bool:
        self.owner.side_lost(self.which, None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner.side_lost(self.which, exc)

    def pause_writing(self) -> None:
        self.owner.side_pause_writing(self.which)

    def resume_writing(self) -> None:
        self.owner.side_resume_writing(self.which)
