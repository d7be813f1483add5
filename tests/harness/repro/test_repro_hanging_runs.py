"""The hanging-transaction entries: producer state expired under an open transaction
(KAFKA-9144), no transaction timeout, a coordinator that does not resend pending markers
(KAFKA-16352), a client that writes before adding the partition (KIP-890 at TV0). With the
bug the final state holds a transaction no one will end (hanging_transactions); defended —
the switch off, or transaction.version 1 and 2 — the run is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.repro.repro_runs import HANGING, assert_as_predicted, run_entry, spark_for
from tests.selection import nightly_except

pytestmark = pytest.mark.integration


#: CI runs one entry (the others, minutes each, run with ``pytest -m nightly``)
@pytest.mark.parametrize("name", nightly_except(HANGING, keep={"producer-state-expiry"}))
def test_the_bug_is_detected_and_the_defense_closes_it(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    out = tmp_path / name
    assert_as_predicted(name, out, run_entry(name, out), spark_for(name, request))
