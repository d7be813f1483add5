"""Summary's derived counts (no Spark needed)."""

from __future__ import annotations

import dataclasses

from txnchaos.analysis.spark.summary import Summary


def _summary() -> Summary:
    timeline = [
        {"sec": 0, "type": "send", "outcome": "ok", "ops": 3, "rows": 3},
        {"sec": 1, "type": "send", "outcome": "ok", "ops": 2, "rows": 2},
        {"sec": 1, "type": "poll", "outcome": "ok", "ops": 1, "rows": 4},
    ]
    return Summary(timeline=timeline, starts={}, processes=["p"], topics=["t"], partitions=[])


def test_counts_come_from_the_timeline() -> None:
    s = _summary()
    assert s.type_counts == {"send": 5, "poll": 1}
    assert s.events == 9


def test_replace_derives_the_counts_again() -> None:
    s = _summary()
    again = dataclasses.replace(s, topics=["u"])
    assert again.type_counts == {"send": 5, "poll": 1}
    assert again.events == 9
    assert s.type_counts == {"send": 5, "poll": 1}
