"""``txnchaos demo`` judges its recorded run with the analysis's checkers: the verdict and the
exit code follow what the checkers find in the run directory, not the demo's own counts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from txnchaos.analysis.reference import judge
from txnchaos.analysis.verdict import INVALID, VALID
from txnchaos.jobs.demo import judge_run
from txnchaos_testing.synthetic import Synth, SynthConfig


def test_a_clean_run_directory_is_valid(tmp_path: Path) -> None:
    Synth(SynthConfig(seed=3)).build().write(tmp_path)
    status, table = judge_run(tmp_path)
    assert status == VALID
    assert table.row_count == len(judge(tmp_path))  # every reference checker has its row


@pytest.mark.parametrize(
    "inject, checker",
    [
        (Synth.inject_aborted_read, "aborted_read"),
        (Synth.inject_lost_write, "lost_write"),
        (Synth.inject_duplicate_offset, "duplicate"),
        (Synth.inject_hanging_at_end, "hanging_transactions"),
    ],
)
def test_an_anomaly_in_the_run_directory_makes_the_demo_invalid(
    tmp_path: Path, inject: Callable[[Synth], str], checker: str
) -> None:
    synth = Synth(SynthConfig(seed=3)).build()
    inject(synth)
    synth.write(tmp_path)
    status, table = judge_run(tmp_path)
    assert status == INVALID
    names = list(table.columns[0].cells)
    statuses = list(table.columns[1].cells)
    assert statuses[names.index(checker)] == INVALID
