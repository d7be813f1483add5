"""CPU time of a process from Linux ``/proc`` (the benchmarks report CPU next to wall time:
CPU barely moves when other work shares the machine)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_times(pid: int) -> tuple[float, float] | None:
    """(user, system) CPU seconds of process ``pid`` so far; None without ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid``; None without ``/proc``."""
    times = cpu_times(pid)
    return None if times is None else sum(times)
