"""CPU lists for pinning node processes: parsing, checking, and pinning a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnchaos.cluster.cpu_placement import (
    CpuListError,
    _render,
    check_cpu_list,
    parse_cpu_list,
    usable_cpus,
)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("1", {1}), ("0-3", {0, 1, 2, 3}), ("0-1,4", {0, 1, 4}), (" 2 , 0-0 ", {0, 2}), ("3,3", {3})],
)
def test_parse_cpu_list(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "is not a CPU number"),
        ("a", "'a' is not a CPU number"),
        ("1,,2", "'' is not a CPU number"),
        ("3-1", "'3-1' is not a valid range"),
        ("-1", "is not a CPU number"),
        ("1-", "is not a CPU number"),
    ],
)
def test_bad_cpu_lists_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(CpuListError, match=problem):
        parse_cpu_list(text)


@given(st.frozensets(st.integers(min_value=0, max_value=300), min_size=1))
def test_rendered_lists_parse_back(cpus: frozenset[int]) -> None:
    assert parse_cpu_list(_render(cpus)) == cpus


def test_a_cpu_this_process_may_not_use_is_refused() -> None:
    usable = usable_cpus()
    absent = max(usable) + 1
    with pytest.raises(CpuListError, match=f"CPU\\(s\\) {absent} not available"):
        check_cpu_list(f"{min(usable)},{absent}")
    assert check_cpu_list(str(min(usable))) == {min(usable)}


def test_a_placed_process_and_the_threads_it_starts_stay_on_its_cpus_batch_scheduled() -> None:
    cpu = max(usable_cpus())
    code = (
        "import os, threading\n"
        "from txnchaos.cluster.cpu_placement import place_this_process\n"
        f"place_this_process('{cpu}')\n"
        "seen = []\n"
        "t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
        "t.start(); t.join()\n"
        "print(sorted(os.sched_getaffinity(0)), seen[0], os.sched_getscheduler(0))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == [f"[{cpu}]", f"[{cpu}]", str(os.SCHED_BATCH)]
    assert usable_cpus() == frozenset(os.sched_getaffinity(0))  # this process is untouched
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_without_linux_affinity_calls_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity")
    with pytest.raises(CpuListError, match="needs Linux"):
        check_cpu_list("0")
