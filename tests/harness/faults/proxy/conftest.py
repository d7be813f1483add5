"""Fixtures shared by the proxy tests."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from txnchaos.harness.faults.proxy.framing import FrameSplitter


@dataclass
class FastPathHits:
    """How many chunks went through the pump's mid-frame fast path."""

    n: int = 0


@pytest.fixture
def fast_path_hits(monkeypatch: pytest.MonkeyPatch) -> FastPathHits:
    """Count calls of ``FrameSplitter.pass_inside`` that took the fast path."""
    hits = FastPathHits()
    inside = FrameSplitter.pass_inside

    def spy(self: FrameSplitter, n: int) -> bool:
        hit = inside(self, n)
        hits.n += hit
        return hit

    monkeypatch.setattr(FrameSplitter, "pass_inside", spy)
    return hits
