"""Every catalogue entry runs in the suite, failing and defended: whole (`txnchaos repro
NAME`, every configuration) in test_repro_{isolation,hanging,two_phase}_runs.py, or — the
three late-request entries of KIP-890 — together in test_late_request_cases.py; entries
on Apache Kafka releases only in bench/detection.py and the nightly job, two reported bugs
on their releases in test_repro_kafka_releases.py. Every entry on several seeds is
`bench/detection.py` (its matrix is in docs/repro.md)."""

from __future__ import annotations

from tests.harness.repro.repro_runs import (
    HANGING,
    ISOLATION,
    NIGHTLY_ONLY,
    ON_RELEASES_ONLY,
    TWO_PHASE,
)
from tests.harness.repro.test_late_request_cases import ENTRIES as LATE_REQUEST
from txnchaos.harness.repro.catalogue import SHIPPED, load_catalogue


def test_every_catalogue_entry_runs_in_the_suite() -> None:
    whole = [*ISOLATION, *HANGING, *TWO_PHASE]
    assert len(set(whole)) == len(whole)
    assert set(whole).isdisjoint(LATE_REQUEST)
    catalogue = load_catalogue(SHIPPED)
    elsewhere = {*LATE_REQUEST, *ON_RELEASES_ONLY, *NIGHTLY_ONLY}
    assert set(whole) | elsewhere == set(catalogue)
    for name in ON_RELEASES_ONLY:
        assert all(c.kafka_version for c in catalogue[name].spec.configurations.values())
