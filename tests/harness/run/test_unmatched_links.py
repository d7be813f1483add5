"""A proxy fault naming links the cluster does not have is said before the run, not left to
act on nothing in silence (smoke.yaml's n1001->* markers on Apache Kafka, where node 1001 is
a controller and sends none)."""

from __future__ import annotations

from txnchaos.harness.nemesis.schedule import ScheduledFault
from txnchaos.harness.run.orchestrator import unmatched_links

KAFKA_LINKS = ["client->n1", "client->n2", "n1->n1", "n1->n2", "n1->n1001", "n2->n1001"]


def fault(link: object) -> ScheduledFault:
    return ScheduledFault(at=28, kind="delay", duration=6, rule={"link": link, "ms": 100})


def test_a_link_glob_matching_nothing_is_named() -> None:
    (note,) = unmatched_links([fault("n1001->*"), fault("client->*")], KAFKA_LINKS)
    assert note.startswith("action 0 (delay at 28 s) names link 'n1001->*'")
    assert "acts on nothing" in note


def test_lists_and_node_faults_and_unproxied_clusters() -> None:
    assert unmatched_links([fault(["n9->*", "n1->*"])], KAFKA_LINKS) == []
    assert len(unmatched_links([fault(["n9->*"])], KAFKA_LINKS)) == 1
    kill = ScheduledFault(at=1, kind="kill", duration=2, node=2)
    assert unmatched_links([kill], KAFKA_LINKS) == []
    assert unmatched_links([fault("client->*")], []) == []  # no proxies: nothing to say
