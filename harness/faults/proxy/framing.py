"""Incremental splitting of a Kafka byte stream into size-prefixed frames.

A Kafka connection carries ``int32 size`` + ``size`` bytes, back to back, in both
directions. The proxy never decodes what it does not need: :class:`FrameSplitter`
walks the chunks read from a socket, finds each frame's head (size prefix plus
the first ``head_len`` bytes of the frame: api key, version and correlation id for
requests, the correlation id for responses) and asks a ``decide`` callback what to
do with the frame:

- ``PASS``: stream its bytes through as they arrive, in the same large slices the
  socket gave us (adjacent passing frames are coalesced into one slice),
- ``DISCARD``: swallow its bytes,
- ``CAPTURE``: buffer the whole frame and hand it over as one ``bytes`` object.

Decisions are made only at frame boundaries, so whatever the callback says, the
output never contains part of a frame followed by part of another one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Any

_SIZE = struct.Struct(">i")

REQUEST_HEAD = 8
"""api_key int16, api_version int16, correlation_id int32."""
RESPONSE_HEAD = 4
"""correlation_id int32."""

MAX_FRAME = 256 * 1024 * 1024


class FramingError(Exception):
    """The stream is not a sequence of Kafka frames (negative or absurd size)."""


class Action(IntEnum):
    PASS = 0
    DISCARD = 1
    CAPTURE = 2


class Event(IntEnum):
    """``feed`` yields ``(event, payload, complete)`` triples.

    PASS: payload is a bytes-like slice to forward; ``complete`` tells whether it
    ends at a frame boundary (False: the rest of that frame follows in later chunks).
    FRAME: payload is one whole captured frame (bytes, size prefix included).
    """

    PASS = 0
    FRAME = 1


Decide = Callable[[bytes | bytearray | memoryview, int, int], Action]
"""``decide(buf, offset, size)``: ``buf[offset:offset+4]`` is the size prefix of a
frame of ``size`` bytes and ``buf[offset+4:offset+4+min(size, head_len)]`` its head."""


class FrameSplitter:
    """Feeds chunks in, gets (Event, payload) out; keeps state across chunks."""

    __slots__ = ("_action", "_capture", "_head", "_head_len", "_remaining", "frames")

    def __init__(self, head_len: int) -> None:
        self._head_len = head_len
        self._head = bytearray()  # a frame head split across chunks
        self._remaining = 0  # bytes of the current frame not seen yet
        self._action = Action.PASS
        self._capture: bytearray | None = None
        self.frames = 0  # frame heads seen so far

    @property
    def at_boundary(self) -> bool:
        """Whether the bytes fed so far end exactly at a frame boundary."""
        return self._remaining == 0 and not self._head

    def pass_inside(self, n: int) -> bool:
        """Whether the next ``n`` bytes lie inside a PASSed frame, not reaching its end.

        If so they are accounted for and the caller forwards them as they are: the
        fast path for the body of a large frame (no event list, no decision).
        """
        if self._remaining > n and self._action is Action.PASS:
            self._remaining -= n
            return True
        return False

    def feed(self, data: bytes | memoryview, decide: Decide) -> list[tuple[Event, Any, bool]]:
        out: list[tuple[Event, Any, bool]] = []
        n = len(data)
        mv = memoryview(data)
        pos = 0
        run = -1  # start of the current run of passing bytes in ``data``
        head_len = self._head_len
        while pos < n:
            if self._remaining:
                take = self._remaining if self._remaining < n - pos else n - pos
                action = self._action
                if action is Action.PASS:
                    if run < 0:
                        run = pos
                elif action is Action.CAPTURE:
                    assert self._capture is not None
                    self._capture += mv[pos : pos + take]
                pos += take
                self._remaining -= take
                if not self._remaining and action is Action.CAPTURE:
                    out.append((Event.FRAME, bytes(self._capture), True))  # type: ignore[arg-type]
                    self._capture = None
                continue
            # At a frame boundary (or inside a head split across chunks).
            if not self._head and n - pos >= 4:
                (size,) = _SIZE.unpack_from(data, pos)
                if size < 0 or size > MAX_FRAME:
                    raise FramingError(f"frame size {size}")
                need = 4 + (size if size < head_len else head_len)
                if n - pos >= need:
                    self.frames += 1
                    action = decide(data, pos, size)
                    self._action = action
                    if action is Action.PASS:
                        if run < 0:
                            run = pos
                    else:
                        if run >= 0:
                            out.append((Event.PASS, mv[run:pos], True))
                            run = -1
                        if action is Action.CAPTURE:
                            self._capture = bytearray(mv[pos : pos + need])
                    pos += need
                    self._remaining = size + 4 - need
                    if not self._remaining and action is Action.CAPTURE:
                        out.append((Event.FRAME, bytes(self._capture), True))  # type: ignore[arg-type]
                        self._capture = None
                    continue
            # The head is incomplete in ``data``: collect it byte-exactly.
            if run >= 0:
                out.append((Event.PASS, mv[run:pos], True))
                run = -1
            head = self._head
            if len(head) < 4:
                take = min(4 - len(head), n - pos)
                head += mv[pos : pos + take]
                pos += take
                if len(head) < 4:
                    break
            (size,) = _SIZE.unpack_from(head, 0)
            if size < 0 or size > MAX_FRAME:
                raise FramingError(f"frame size {size}")
            need = 4 + (size if size < head_len else head_len)
            take = min(need - len(head), n - pos)
            head += mv[pos : pos + take]
            pos += take
            if len(head) < need:
                break
            self.frames += 1
            action = decide(head, 0, size)
            self._action = action
            if action is Action.PASS:
                out.append((Event.PASS, bytes(head), size + 4 == need))
            elif action is Action.CAPTURE:
                self._capture = bytearray(head)
            self._remaining = size + 4 - need
            self._head = bytearray()
            if not self._remaining and action is Action.CAPTURE:
                out.append((Event.FRAME, bytes(self._capture), True))  # type: ignore[arg-type]
                self._capture = None
        if run >= 0:
            out.append((Event.PASS, mv[run:n] if run else data, not self._remaining))
        return out


def frame_size(frame: bytes) -> int:
    return _SIZE.unpack_from(frame, 0)[0]
