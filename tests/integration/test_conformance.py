"""The differential conformance suite's CI part: every probe on our cluster against Apache
Kafka's recorded answers (``txnchaos conformance``, the recording committed with the
suite). The live comparison with Kafka runs in the nightly job (docs/conformance.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from txnchaos.harness.conformance.catalogue import catalogue

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def conformance(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnchaos.harness.cli", "conformance", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_every_probe_is_equal_to_kafkas_recorded_answer_or_explained(tmp_path: Path) -> None:
    r = conformance("--json", str(tmp_path / "rows.json"))
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("conformance: apache-kafka 4.4.0 (recorded: kafka-4.4.0.json)")
    for name in catalogue():
        assert any(line.startswith(name + " ") for line in lines), name
    assert lines[-1] == "PASS"


def test_a_bug_switch_makes_a_probe_differ() -> None:
    """The suite sees a real difference: with the LSO bug switched on, our open
    transaction no longer holds the LSO, and the probe differs from Kafka's answer."""
    r = conformance(
        "--probe", "lso.open-transaction-holds-lso",
        "--set", "txnchaos.bug.lso.ignores.open.transactions=true",
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "lso.open-transaction-holds-lso[tv2]" in r.stdout and "DIFFERENT" in r.stdout
    assert "offsets.lso: kafka=3 ours=6" in r.stdout
    assert r.stdout.splitlines()[-1] == "FAIL"
