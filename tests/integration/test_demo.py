"""The demo behind the README's main command: a transactional smoke run, recorded as a run
directory and judged by the analysis's checkers, ends valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.analysis.reference import judge
from txnchaos.jobs.demo import run_smoke

pytestmark = pytest.mark.integration


def test_transactional_smoke_run_is_valid(tmp_path: Path) -> None:
    assert run_smoke(brokers=2, transactions=60, partitions=3, data_dir=tmp_path) == 0
    run_dir = tmp_path / "run"
    assert (run_dir / "history.parquet").is_file() and (run_dir / "final_state.json").is_file()
    judged = judge(run_dir)
    for checker in ("aborted_read", "lost_write", "duplicate", "ordering", "hanging_transactions"):
        assert judged[checker].unknown is None, (checker, judged[checker].unknown)
        assert judged[checker].rows == [], checker
