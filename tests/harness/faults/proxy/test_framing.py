"""The frame splitter: any chunking, any per-frame decision, no frame interleaving."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.harness.faults.proxy.framing import (
    REQUEST_HEAD,
    Action,
    Event,
    FrameSplitter,
    FramingError,
)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=12),
    actions=st.lists(st.sampled_from(list(Action)), min_size=12, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=20),
)
def test_split_any_chunking(payloads: list[bytes], actions: list[Action], cuts: list[int]) -> None:
    frames = [frame(p) for p in payloads]
    stream = b"".join(frames)
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    splitter = FrameSplitter(REQUEST_HEAD)
    seen_heads: list[bytes] = []

    def decide(buf: bytes | memoryview, off: int, size: int) -> Action:
        i = len(seen_heads)
        head_end = off + 4 + min(size, REQUEST_HEAD)
        seen_heads.append(bytes(buf[off:head_end]))
        return actions[i]

    passed = bytearray()
    captured: list[bytes] = []
    boundary_flags: list[tuple[int, bool]] = []
    for lo, hi in itertools.pairwise(bounds):
        for ev, payload, complete in splitter.feed(stream[lo:hi], decide):
            if ev is Event.PASS:
                passed += payload
                boundary_flags.append((len(passed), complete))
            else:
                captured.append(payload)
    assert splitter.at_boundary
    assert len(seen_heads) == len(frames)
    for head, f in zip(seen_heads, frames, strict=True):
        assert f.startswith(head)
    expect_pass = b"".join(f for f, a in zip(frames, actions, strict=False) if a is Action.PASS)
    expect_cap = [f for f, a in zip(frames, actions, strict=False) if a is Action.CAPTURE]
    assert bytes(passed) == expect_pass
    assert captured == expect_cap
    # "complete" is True exactly when the passed bytes so far end at a frame boundary
    ends = set()
    total = 0
    for f, a in zip(frames, actions, strict=False):
        if a is Action.PASS:
            total += len(f)
            ends.add(total)
    for pos, complete in boundary_flags:
        assert complete == (pos in ends)


def test_pass_coalesces_into_one_slice() -> None:
    stream = b"".join(frame(bytes([i]) * 20) for i in range(50))
    out = FrameSplitter(REQUEST_HEAD).feed(stream, lambda *_: Action.PASS)
    assert len(out) == 1
    assert out[0][1] is stream and out[0][2]


def test_negative_size_is_an_error() -> None:
    with pytest.raises(FramingError):
        FrameSplitter(REQUEST_HEAD).feed(struct.pack(">i", -5) + b"xxxx", lambda *_: Action.PASS)


def test_pass_inside_only_within_a_passed_frame() -> None:
    splitter = FrameSplitter(REQUEST_HEAD)
    big = frame(bytes(100))
    out = splitter.feed(big[:20], lambda *_: Action.PASS)
    assert [(ev, bytes(p), c) for ev, p, c in out] == [(Event.PASS, big[:20], False)]
    assert splitter.pass_inside(50)  # bytes 20..70 of 104: inside
    assert not splitter.pass_inside(34)  # would reach the frame's end: not the fast path
    out = splitter.feed(big[70:], lambda *_: Action.PASS)
    assert [(ev, bytes(p), c) for ev, p, c in out] == [(Event.PASS, big[70:], True)]
    assert splitter.at_boundary
    assert not splitter.pass_inside(1)  # at a boundary: the next frame needs a decision
    discarding = FrameSplitter(REQUEST_HEAD)
    discarding.feed(big[:20], lambda *_: Action.DISCARD)
    assert not discarding.pass_inside(10)
    capturing = FrameSplitter(REQUEST_HEAD)
    capturing.feed(big[:20], lambda *_: Action.CAPTURE)
    assert not capturing.pass_inside(10)
