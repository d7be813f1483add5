"""Sending fuzz cases to a node and classifying what came back.

A case that is one honest frame goes over a kept-open connection: the node reads on
after a bad body only if it answered, so a connection serves cases until the node
closes it. Any other case (several frames, a size prefix that lies) gets a connection
of its own, half-closed after the write so the node sees the end of its input.

Produce with acks=0 has no response by design; a Produce case is therefore followed on
the same connection by an ApiVersions request (the sentinel), whose answer shows the
node read past the case.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import encode_request, request_class
from .mutators import Case

_SIZE = struct.Struct(">i")
_I32 = struct.Struct(">i")
SENTINEL_CORRELATION = -7
SENTINEL = encode_request(SENTINEL_CORRELATION, make(request_class(18, 0)), "fuzz-sentinel")


class Outcome(StrEnum):
    ANSWERED = "answered"
    """A response with the case's correlation id (or, for acks=0 Produce, none before
    the sentinel's)."""
    CLOSED = "closed"
    """The node closed the connection without answering (Kafka's answer to bad frames)."""
    UNANSWERED = "unanswered"
    """Neither an answer nor a close within the case timeout."""
    MISMATCH = "mismatch"
    """A response with another correlation id: the node answered out of order."""
    REFUSED = "refused"
    """No connection (the node is down, or refused it)."""


@dataclass(frozen=True)
class Node:
    """A node the fuzzer sends to; ``pid`` and ``log`` are known for local clusters."""

    node_id: int
    role: str
    host: str
    port: int
    pid: int | None = None
    log: Path | None = None

    @property
    def name(self) -> str:
        return f"node {self.node_id} ({self.role})"


class Connection:
    """One open connection to a node."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, node: Node) -> Connection:
        reader, writer = await asyncio.open_connection(node.host, node.port, limit=1 << 20)
        return cls(reader, writer)

    def close(self) -> None:
        self.writer.transport.abort()

    async def read_frame(self) -> bytes:
        """One response frame; IncompleteReadError/ConnectionError at the node's close."""
        (size,) = _SIZE.unpack(await self.reader.readexactly(4))
        return await self.reader.readexactly(size)


def wants_sentinel(case: Case) -> bool:
    """A single Produce frame may be acks=0 (no response): follow it with the sentinel."""
    return case.single and case.data[4:6] == b"\x00\x00"


async def answer_of_single(conn: Connection, case: Case) -> Outcome:
    """Read what the node sends for a single-frame case already written (with the
    sentinel behind it when :func:`wants_sentinel`)."""
    expected = case.correlation_id
    try:
        frame = await conn.read_frame()
        (got,) = _I32.unpack_from(frame, 0)
        if wants_sentinel(case):
            if got == SENTINEL_CORRELATION:
                return Outcome.ANSWERED  # acks=0: no response, as Kafka
            frame = await conn.read_frame()
            if _I32.unpack_from(frame, 0)[0] != SENTINEL_CORRELATION:
                return Outcome.MISMATCH
        return Outcome.ANSWERED if got == expected else Outcome.MISMATCH
    except (asyncio.IncompleteReadError, ConnectionError, struct.error):
        return Outcome.CLOSED


async def answers_until_eof(conn: Connection) -> Outcome:
    """Read every response until the node closes (after a half-close of ours)."""
    try:
        while True:
            await conn.read_frame()
    except (asyncio.IncompleteReadError, ConnectionError, struct.error):
        return Outcome.CLOSED


def write_case(conn: Connection, case: Case) -> None:
    conn.writer.write(case.data + SENTINEL if wants_sentinel(case) else case.data)
    if not case.single:
        with contextlib.suppress(OSError, RuntimeError):
            conn.writer.write_eof()


async def send_alone(node: Node, case: Case, timeout: float) -> Outcome:
    """One case on a connection of its own, closed afterwards (replays, bisection)."""
    try:
        conn = await asyncio.wait_for(Connection.open(node), timeout)
    except (OSError, TimeoutError):
        return Outcome.REFUSED
    try:
        write_case(conn, case)
        reading = answer_of_single(conn, case) if case.single else answers_until_eof(conn)
        try:
            return await asyncio.wait_for(reading, timeout)
        except TimeoutError:
            return Outcome.UNANSWERED
    finally:
        conn.close()


__all__ = [
    "Connection",
    "Node",
    "Outcome",
    "answer_of_single",
    "answers_until_eof",
    "send_alone",
    "wants_sentinel",
    "write_case",
]
