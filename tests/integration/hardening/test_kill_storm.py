"""Issue 35's "done when": a kill -9 storm with a full disk in the middle loses no
acknowledged write. A short storm of bench/kill_storm.py (the long one is the bench):
transactional producers commit while nodes are SIGKILLed and restarted and broker 1's
disk (a real tmpfs) fills up and gets room again; every acknowledged commit is read once
with read_committed, nothing aborted is visible, no unknown outcome is partial."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def test_a_kill_storm_with_a_full_disk_loses_no_acknowledged_commit() -> None:
    short = ["--seconds", "30", "--interval", "1.5", "--full-seconds", "4", "--producers", "3"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "kill_storm.py"), *short],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    if done.returncode == 2:
        pytest.skip(done.stderr.strip())
    report = done.stdout
    print(report)
    assert done.returncode == 0, report + done.stderr[-3000:]
    assert "lost 0, duplicated 0, aborted visible 0, partial unknown 0" in report
    assert "log dir offline: yes" in report  # the disk really was full under load
