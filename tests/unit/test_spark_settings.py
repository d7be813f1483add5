"""The local Spark JVM's settings chosen from a run's size (no Spark started)."""

from __future__ import annotations

import pytest

from txnchaos.analysis.spark import QUICK_JIT_ROWS, jit_mode, local_cores


def test_short_jobs_use_the_quick_jit_and_long_ones_the_optimising_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TXNCHAOS_SPARK_JIT", raising=False)
    assert jit_mode(None) == "quick"  # many small histories (the test suite's shared session)
    assert jit_mode(1_000) == "quick"
    assert jit_mode(QUICK_JIT_ROWS) == "quick"
    assert jit_mode(QUICK_JIT_ROWS + 1) == "full"


def test_the_jit_can_be_forced_and_a_bad_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXNCHAOS_SPARK_JIT", "full")
    assert jit_mode(10) == "full"
    monkeypatch.setenv("TXNCHAOS_SPARK_JIT", "fast")
    with pytest.raises(ValueError, match="TXNCHAOS_SPARK_JIT='fast'"):
        jit_mode(10)


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[3,2]", 3), ("local[x]", 1)],
)
def test_local_cores(master: str, cores: int) -> None:
    assert local_cores(master) == cores
