"""bench/analysis.py's command line: bad sizes are refused before anything is generated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "analysis.py"


@pytest.mark.parametrize(
    ("sizes", "says"),
    [
        ("abc", "expected counts such as 1000000,10000000"),
        ("1000000,", "expected counts such as 1000000,10000000"),
        ("0,5", "every size must be a positive count"),
    ],
)
def test_bad_sizes_are_refused_with_a_message(sizes: str, says: str, tmp_path: Path) -> None:
    keep = tmp_path / "histories"
    r = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", sizes, "--keep", str(keep)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2
    assert f"argument --sizes: {sizes!r}: {says}" in r.stderr
    assert not keep.exists()  # refused before generating anything


def test_help_explains_every_option() -> None:
    r = subprocess.run(
        [sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0
    for option in ("--sizes", "--master", "--keep DIR"):
        assert option in r.stdout
    assert "Spark start" in r.stdout
