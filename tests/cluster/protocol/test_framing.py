"""FrameBuffer: frames come out whole and in order however the bytes are split into
reads, large frames grow the buffer (and it shrinks back), bad sizes are refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.cluster.protocol.framing import FrameBuffer, FrameTooLarge


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def feed(buffer: FrameBuffer, data: bytes, limit: int = 1 << 30) -> list[bytes]:
    """Deliver ``data`` as the event loop would: into get_buffer(), as much as fits."""
    out: list[bytes] = []
    while data:
        target = buffer.get_buffer()
        n = min(len(target), len(data))
        target[:n] = data[:n]
        target.release()
        data = data[n:]
        out += buffer.frames_after(n, limit)
    return out


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(
        st.binary(max_size=300) | st.binary(min_size=5000, max_size=70000), max_size=8
    ),
    cuts=st.lists(st.integers(1, 9000), max_size=30),
)
def test_frames_survive_any_split(payloads: list[bytes], cuts: list[int]) -> None:
    buffer = FrameBuffer(initial=8 * 1024)
    data = framed(payloads)
    out: list[bytes] = []
    for cut in cuts:
        chunk, data = data[:cut], data[cut:]
        out += feed(buffer, chunk)
    out += feed(buffer, data)
    assert out == payloads
    assert buffer.buffered == 0


def test_a_huge_frame_grows_the_buffer_which_then_shrinks_back() -> None:
    buffer = FrameBuffer(initial=8 * 1024)
    big = bytes(range(256)) * 1000  # 256,000 bytes
    assert feed(buffer, framed([big, b"after"])) == [big, b"after"]
    assert len(buffer.get_buffer()) == 8 * 1024


@pytest.mark.parametrize("size", [-1, 101])
def test_sizes_outside_the_limit_are_refused(size: int) -> None:
    buffer = FrameBuffer()
    target = buffer.get_buffer()
    data = framed([b"ok"]) + struct.pack(">i", size)
    target[: len(data)] = data
    target.release()
    with pytest.raises(FrameTooLarge) as caught:
        buffer.frames_after(len(data), limit=100)
    assert caught.value.frames == [b"ok"]
    assert caught.value.size == size


def test_a_claimed_size_alone_allocates_nothing() -> None:
    """A prefix claiming ~100 MiB and one byte: the buffer stays at its usual size."""
    buffer = FrameBuffer(initial=64 * 1024)
    assert feed(buffer, struct.pack(">i", 100 * 1024 * 1024 - 1) + b"x", limit=100 << 20) == []
    buffer.get_buffer().release()
    assert buffer.capacity == 64 * 1024
    assert buffer.partial_frame == 100 * 1024 * 1024 + 3


def test_memory_follows_the_bytes_received() -> None:
    buffer = FrameBuffer(initial=8 * 1024)
    claimed = 10 * 1024 * 1024
    feed(buffer, struct.pack(">i", claimed), limit=1 << 30)
    received = 4
    for _ in range(12):  # 12 reads of 8 KiB: ~96 KiB of a 10 MiB frame
        feed(buffer, b"\x00" * 8192)
        received += 8192
        buffer.get_buffer().release()
        assert buffer.capacity <= 4 * received + 8 * 1024  # doubling: at most 2x of 2x
