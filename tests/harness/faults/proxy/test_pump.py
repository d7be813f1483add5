"""The pump's read path: reused read buffer, mid-frame fast path, transports that keep
references to unsent data (Python >= 3.12), against fake transports (no sockets)."""

from __future__ import annotations

import asyncio
import random
import struct
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.harness.faults.proxy import pump as pump_mod
from txnchaos.harness.faults.proxy.framing import REQUEST_HEAD, Action
from txnchaos.harness.faults.proxy.pump import Pump, keeps_unsent

from .conftest import FastPathHits


def frame(api_key: int, corr: int, body_len: int) -> bytes:
    body = struct.pack(">hhi", api_key, 0, corr) + bytes((corr + i) % 251 for i in range(body_len))
    return struct.pack(">i", len(body)) + body


@dataclass
class Counts:
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass
class FakeTransport:
    """Takes ``accept`` bytes per write while it has no backlog (None: everything);
    the rest waits until :meth:`drain`. ``keeps_refs``: the unsent rest is kept as a
    reference to the caller's buffer (Python >= 3.12), not copied (3.11)."""

    keeps_refs: bool = False
    accept: int | None = None
    out: bytearray = field(default_factory=bytearray)
    pending: list[Any] = field(default_factory=list)
    paused: bool = False

    def write(self, data: Any) -> None:
        if not self.pending:
            n = len(data) if self.accept is None else min(self.accept, len(data))
            self.out += data[:n]
            data = memoryview(data)[n:]
            if not len(data):
                return
        self.pending.append(data if self.keeps_refs else bytes(data))

    def get_write_buffer_size(self) -> int:
        return sum(len(p) for p in self.pending)

    def drain(self) -> None:
        for p in self.pending:
            self.out += p
        self.pending.clear()

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def make_pump(decide: Any, dst: FakeTransport) -> tuple[Pump, Counts]:
    async def on_frame(frame: bytes) -> None:  # pragma: no cover - PASS/DISCARD only
        raise AssertionError("no frame is captured here")

    counts = Counts()
    p = Pump(REQUEST_HEAD, decide, on_frame, lambda: (), None, _raise, counts, up=True)
    p.src = FakeTransport()  # type: ignore[assignment]
    p.dst = dst  # type: ignore[assignment]
    return p, counts


def _raise(exc: BaseException) -> None:
    raise exc


def read_into(p: Pump, data: bytes) -> None:
    """What the transport does: ``recv_into`` the pump's buffer, as much as fits."""
    pos = 0
    while pos < len(data):
        buf = p.get_buffer()
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        pos += n
        p.buffer_updated(n)


@pytest.fixture
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny read buffers so that short test streams use growth and the fast path."""
    monkeypatch.setattr(pump_mod, "READ_MIN", 16)
    monkeypatch.setattr(pump_mod, "READ_MAX", 64)


STREAM_FRAMES = [frame(0, 1, 3), frame(26, 2, 300), frame(3, 3, 0), frame(0, 4, 90), frame(1, 5, 7)]
STREAM = b"".join(STREAM_FRAMES)


@pytest.mark.usefixtures("small_buffers")
def test_split_at_every_byte_passes_intact(fast_path_hits: FastPathHits) -> None:
    for cut in range(len(STREAM) + 1):
        heads: list[bytes] = []

        def decide(buf: Any, off: int, size: int, heads: list[bytes] = heads) -> Action:
            heads.append(bytes(buf[off : off + 4 + min(size, REQUEST_HEAD)]))
            return Action.PASS

        dst = FakeTransport()
        p, counts = make_pump(decide, dst)
        read_into(p, STREAM[:cut])
        read_into(p, STREAM[cut:])
        assert bytes(dst.out) == STREAM
        assert counts.bytes_up == len(STREAM)
        assert heads == [f[: 4 + REQUEST_HEAD] for f in STREAM_FRAMES]
        assert p.splitter.at_boundary and not p.mid_pass
    assert fast_path_hits.n > 0  # the mid-frame fast path was exercised


@pytest.mark.usefixtures("small_buffers")
def test_buffer_grows_to_the_cap_and_is_reused() -> None:
    p, _ = make_pump(lambda *_: Action.PASS, FakeTransport())
    small = frame(0, 1, 2)  # reads that do not fill the buffer: no growth
    for _ in range(3):
        assert len(p.get_buffer()) == 16
        read_into(p, small)
    big = frame(0, 1, 400)
    seen = []
    pos = 0
    while pos < len(big):
        buf = p.get_buffer()
        seen.append((len(buf), id(buf.obj)))
        n = min(len(buf), len(big) - pos)
        buf[:n] = big[pos : pos + n]
        pos += n
        p.buffer_updated(n)
    lens = [s for s, _ in seen]
    assert lens[:3] == [16, 32, 64] and set(lens[3:]) == {64}
    assert len({o for s, o in seen if s == 64}) == 1  # reused once at the cap


@pytest.mark.usefixtures("small_buffers")
@pytest.mark.parametrize("keeps_data_flag", [True, False])
def test_transport_keeping_references_never_sees_reused_bytes(
    monkeypatch: pytest.MonkeyPatch, keeps_data_flag: bool
) -> None:
    """A 3.12-style transport keeps a reference to what it could not send. With the
    pump told so (``WRITE_KEEPS_DATA``), output stays exact however the socket drains;
    told otherwise (the 3.11 assumption), the reused buffer corrupts it: the check is
    sensitive."""
    monkeypatch.setattr(pump_mod, "WRITE_KEEPS_DATA", keeps_data_flag)
    rng = random.Random(5)
    stream = b"".join(frame(0, i, rng.randrange(0, 200)) for i in range(40))
    dst = FakeTransport(keeps_refs=True, accept=7)
    p, _ = make_pump(lambda *_: Action.PASS, dst)
    pos = 0
    while pos < len(stream):
        buf = p.get_buffer()
        n = min(len(buf), len(stream) - pos, rng.randrange(1, 80))
        buf[:n] = stream[pos : pos + n]
        pos += n
        p.buffer_updated(n)
        if rng.random() < 0.3:
            dst.drain()
    dst.drain()
    if keeps_data_flag:
        assert bytes(dst.out) == stream
    else:
        assert bytes(dst.out) != stream


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=10),
    discard=st.lists(st.booleans(), min_size=10, max_size=10),
    cuts=st.lists(st.integers(min_value=1, max_value=120), min_size=1, max_size=40),
    keeps_refs=st.booleans(),
    accept=st.one_of(st.none(), st.integers(min_value=1, max_value=50)),
)
def test_any_chunking_and_decisions(
    sizes: list[int],
    discard: list[bool],
    cuts: list[int],
    keeps_refs: bool,
    accept: int | None,
) -> None:
    """Random reads (never more than the buffer offers), PASS/DISCARD per frame, a slow
    destination: exactly the PASSed frames come out, in order, byte for byte."""
    frames = [frame(0, i, n) for i, n in enumerate(sizes)]
    stream = b"".join(frames)
    decisions = iter(discard)

    def decide(buf: Any, off: int, size: int) -> Action:
        return Action.DISCARD if next(decisions) else Action.PASS

    saved = pump_mod.WRITE_KEEPS_DATA, pump_mod.READ_MIN, pump_mod.READ_MAX
    pump_mod.WRITE_KEEPS_DATA, pump_mod.READ_MIN, pump_mod.READ_MAX = True, 8, 64
    try:
        dst = FakeTransport(keeps_refs=keeps_refs, accept=accept)
        p, counts = make_pump(decide, dst)
        pos = 0
        for i, cut in enumerate(cuts * (len(stream) // max(1, sum(cuts)) + 2)):
            if pos >= len(stream):
                break
            buf = p.get_buffer()
            n = min(len(buf), len(stream) - pos, cut)
            buf[:n] = stream[pos : pos + n]
            pos += n
            p.buffer_updated(n)
            if i % 3 == 0:
                dst.drain()
        read_into(p, stream[pos:])
        dst.drain()
    finally:
        pump_mod.WRITE_KEEPS_DATA, pump_mod.READ_MIN, pump_mod.READ_MAX = saved
    expect = b"".join(f for f, d in zip(frames, discard, strict=False) if not d)
    assert bytes(dst.out) == expect
    assert counts.bytes_up == len(stream)
    assert p.splitter.at_boundary


def test_keeps_unsent_only_trusts_asyncio_copying_transports() -> None:
    async def body() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        host, port = server.sockets[0].getsockname()[:2]
        transport, _ = await loop.create_connection(asyncio.Protocol, host, port)
        try:
            return keeps_unsent(transport), keeps_unsent(FakeTransport())
        finally:
            transport.close()
            server.close()

    real, unknown = asyncio.run(body())
    assert real == (sys.version_info >= (3, 12))
    assert unknown  # any other transport: assume it keeps references
