"""The demo behind the README's main command: a transactional smoke run ends valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.harness.smoke import run_smoke

pytestmark = pytest.mark.integration


def test_transactional_smoke_run_is_valid(tmp_path: Path) -> None:
    assert run_smoke(brokers=2, transactions=60, partitions=3, data_dir=tmp_path) == 0
