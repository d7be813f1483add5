"""Cutting size-prefixed Kafka frames out of a reusable receive buffer.

The node's server and its peer client are ``asyncio.BufferedProtocol``s fed by this:
the event loop reads straight into the buffer with ``recv_into``. A plain
``asyncio.Protocol`` gets a new ``bytes`` per read, which asyncio allocates at
256 KiB (its read size) and then shrinks: above glibc's mmap threshold, so every
read paid an mmap/munmap pair and page faults (~12 µs here, against ~2 µs for
``recv_into``), on every request and response of every node.

The buffer only grows for a frame larger than it, and then only as that frame's bytes
arrive (to at most about four times what has arrived): a size prefix alone, claiming up to
the frame limit, costs no memory. It goes back to its usual size once it is empty
again. It is never resized while asyncio holds the memoryview handed out for a read
(only ``get_buffer`` resizes it).
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")

DEFAULT_BUFFER = 64 * 1024
MIN_READ = 4 * 1024
"""Compact or grow the buffer when less than this is free at its end."""


class FrameTooLarge(Exception):
    """A size prefix outside [0, limit]; ``frames`` are the complete frames before it."""

    def __init__(self, size: int, limit: int, frames: list[bytes]) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size
        self.limit = limit
        self.frames = frames


class FrameBuffer:
    """Bytes read so far; complete frames (without their size prefix) come out of
    :meth:`frames_after`."""

    __slots__ = ("_buf", "_end", "_need", "_start", "initial")

    def __init__(self, initial: int = DEFAULT_BUFFER) -> None:
        self.initial = initial
        self._buf = bytearray(initial)
        self._start = 0  # first unread byte
        self._end = 0  # end of the bytes read
        self._need = 0  # bytes the incomplete frame at _start still needs

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._end - self._start

    @property
    def capacity(self) -> int:
        """Bytes the buffer holds now (received or not)."""
        return len(self._buf)

    @property
    def partial_frame(self) -> int:
        """Size, with its prefix, of the incomplete frame the buffer waits for (0: none)."""
        return self._need + self._end - self._start if self._need else 0

    def get_buffer(self) -> memoryview:
        """Where the next read goes (``BufferedProtocol.get_buffer``)."""
        buf = self._buf
        free = len(buf) - self._end
        pending = self._end - self._start
        # Room for the rest of the frame, but no more than what has arrived: memory
        # follows the bytes received, not the size a client claims.
        want = max(MIN_READ, min(self._need, pending))
        if free >= want:
            return memoryview(buf)[self._end :]
        size = len(buf)
        while size - pending < want:
            size *= 2
        if size != len(buf):
            grown = bytearray(size)
            grown[:pending] = buf[self._start : self._end]
            self._buf = grown
        elif self._start:
            buf[:pending] = buf[self._start : self._end]  # same length: no resize
        self._start, self._end = 0, pending
        return memoryview(self._buf)[pending:]

    def frames_after(self, nbytes: int, limit: int) -> list[bytes]:
        """Account for ``nbytes`` read into the buffer and return the frames now
        complete. Raises :class:`FrameTooLarge` for a size prefix outside [0, limit]
        (carrying the frames before it; the caller answers those and closes)."""
        self._end += nbytes
        buf = self._buf
        pos, end = self._start, self._end
        frames: list[bytes] = []
        self._need = 0
        with memoryview(buf) as view:
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > limit:
                    raise FrameTooLarge(size, limit, frames)
                if end - pos - 4 < size:
                    self._need = size + 4 - (end - pos)
                    break
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
        if pos == end:
            pos = end = 0
            if len(buf) > 4 * self.initial:
                self._buf = bytearray(self.initial)  # give a huge frame's memory back
        self._start, self._end = pos, end
        return frames


__all__ = ["DEFAULT_BUFFER", "FrameBuffer", "FrameTooLarge"]
