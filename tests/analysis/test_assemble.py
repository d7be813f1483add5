"""The verdict's anomaly results, shared by both engines: one pass over every row, or the merge
of the Spark anomaly job's results with the rows checkers return themselves, are the same."""

from __future__ import annotations

from typing import Any

from txnchaos.analysis.assemble import SEC, anomaly_results, merge


def _row(kind: str, t: int | None, weight: int = 1) -> dict[str, Any]:
    return {"checker": "c", "kind": kind, "time_ns": t, "weight": weight, "evidence": {"t": t}}


def test_merging_two_sources_of_one_kind_equals_one_pass() -> None:
    frames = [_row("a", 5 * SEC), _row("a", None), _row("b", 2 * SEC, 3)]
    direct = [_row("a", 1 * SEC), _row("a", 5 * SEC + 1, 2)]
    one = anomaly_results(frames + direct, 2)
    assert merge([anomaly_results(frames, 2), anomaly_results(direct, 2)], 2) == one
    counts, examples, timeline = one
    assert counts == {("c", "a"): 5, ("c", "b"): 3}
    assert [(e["kind"], e["time_ns"]) for e in examples] == [
        ("a", 1 * SEC),
        ("a", 5 * SEC),
        ("b", 2 * SEC),
    ]
    assert timeline == [
        {"checker": "c", "sec": 1, "n": 1},
        {"checker": "c", "sec": 2, "n": 3},
        {"checker": "c", "sec": 5, "n": 3},
    ]
