"""bench/transactions.py's command line: its modes are explained, and bad input is refused
before any cluster starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "transactions.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tv", "1"], "--tv needs --client"),
        (["--client", "ours", "--tv", "3"], "argument --tv: invalid choice: 3"),
        (["--client", "kafka-python"], "argument --client: invalid choice: 'kafka-python'"),
        (["--producers", "1,x"], "--producers: expected counts such as 1,8"),
        (["--producers", "0"], "--producers: every count must be at least 1"),
        (["--seconds", "0"], "--seconds must be positive"),
        (["--partitions", "0"], "--partitions must be between 1 and 1000"),
    ],
)
def test_bad_input_is_refused_with_a_message(args: list[str], says: str) -> None:
    r = run(*args)
    assert r.returncode == 2
    assert says in r.stderr
    assert "cluster:" not in r.stdout  # refused before a cluster started


def test_help_explains_the_modes() -> None:
    r = run("--help")
    assert r.returncode == 0
    for text in (
        "--client {ours,librdkafka,java}",
        "--tv {0,1,2}",
        "UpdateFeatures",
        "verification",
    ):
        assert text in r.stdout
