"""Whole verdicts of the two engines, made comparable: everything but which engine judged, its
Spark application and how long it took (``timings``), with the series the report draws; or a
verdict.json Spark wrote (without series) against the plain rules' verdict."""

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
    d = comparable_json(v.to_json())
    d["series"] = json.loads(json.dumps(v.series, default=str))
    return d


def comparable_json(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict (as verdict.json holds it) without what differs by engine; the catalogue's
    resemblance is left out too (it follows from the checkers' statuses, compared)."""
    d = json.loads(json.dumps(verdict, default=str))
    for key in ("timings", "engine", "spark", "resembles"):
        d.pop(key, None)
    for c in d["checkers"].values():
        c["examples"] = _examples(c["examples"])
    return d


def assert_spark_wrote_the_rules_verdict(written: dict[str, Any], reference: Verdict) -> None:
    """verdict.json as PySpark wrote it equals the plain rules' verdict of the same run."""
    assert written["engine"] == "spark" and reference.engine == "reference"
    assert written["spark"]["master"] and written["spark"]["app_id"], written["spark"]
    want, have = comparable_json(written), comparable_json(reference.to_json())
    for name in want["checkers"]:
        assert have["checkers"][name] == want["checkers"][name], name
    assert have == want


def assert_same_verdict(spark: Verdict, reference: Verdict) -> None:
    assert (spark.engine, reference.engine) == ("spark", "reference")
    want, have = comparable(spark), comparable(reference)
    for name in want["checkers"]:
        assert have["checkers"][name] == want["checkers"][name], name
    for key in want["series"]:
        assert have["series"].get(key) == want["series"][key], key
    assert have == want
