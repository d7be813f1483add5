"""Whole verdicts of the two engines, made comparable: everything but which engine judged and
how long it took (``timings``), with the series the report draws."""

from __future__ import annotations

import json
from typing import Any

from txnchaos.analysis.verdict import Verdict

EXAMPLES = 5


def _examples(examples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: the examples as sorted JSON; when the kind has more anomalies than examples
    shown, only their times (Spark picks any of the rows tied at the cut-off time)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for e in examples:
        by_kind.setdefault(e["kind"], []).append(e)
    return {
        kind: sorted(e["time_ns"] or 0 for e in ex)
        if len(ex) == EXAMPLES
        else sorted(json.dumps(e, sort_keys=True, default=str) for e in ex)
        for kind, ex in by_kind.items()
    }


def comparable(v: Verdict) -> dict[str, Any]:
    d = v.to_json()
    del d["timings"], d["engine"]
    d["series"] = json.loads(json.dumps(v.series, default=str))
    for c in d["checkers"].values():
        c["examples"] = _examples(c["examples"])
    return d


def assert_same_verdict(spark: Verdict, reference: Verdict) -> None:
    assert (spark.engine, reference.engine) == ("spark", "reference")
    want, have = comparable(spark), comparable(reference)
    for name in want["checkers"]:
        assert have["checkers"][name] == want["checkers"][name], name
    for key in want["series"]:
        assert have["series"].get(key) == want["series"][key], key
    assert have == want
